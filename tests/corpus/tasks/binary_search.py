def search(xs: list[int], target: int) -> int:
    lo, hi = 0, len(xs)
    while lo < hi:
        mid = (lo + hi) // 2
        if xs[mid] < target:
            lo = mid + 1
        elif xs[mid] > target:
            hi = mid
        else:
            return mid
    return -1

def lower_bound(xs: list[int], target: int) -> int:
    lo = 0
    hi = len(xs)
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if xs[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo

# call: search([1, 3, 5, 7, 9], 7) -> 3
# call: search([1, 3, 5, 7, 9], 1) -> 0
# call: search([1, 3, 5, 7, 9], 4) -> -1
# call: search([], 4) -> -1
# call: lower_bound([1, 2, 2, 2, 5], 2) -> 1
# call: lower_bound([1, 2, 2, 2, 5], 6) -> 5
