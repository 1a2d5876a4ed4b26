def bubble(xs: list[int]) -> list[int]:
    n = len(xs)
    for i in range(n):
        for j in range(n - 1 - i):
            if xs[j] > xs[j + 1]:
                xs[j], xs[j + 1] = xs[j + 1], xs[j]
    return xs

def insertion(xs: list[int]) -> list[int]:
    for i in range(1, len(xs)):
        v = xs[i]
        j = i - 1
        while j >= 0 and xs[j] > v:
            xs[j + 1] = xs[j]
            j -= 1
        xs[j + 1] = v
    return xs

def is_sorted(xs: list[int]) -> bool:
    for i in range(1, len(xs)):
        if xs[i - 1] > xs[i]:
            return False
    return True

def sort_copy(xs: list[int]) -> list[int]:
    ys = xs + []
    insertion(ys)
    return xs + ys

# call: bubble([3, -1, 2, 2, 0]) -> [-1, 0, 2, 2, 3]
# call: bubble([]) -> []
# call: insertion([5, 4, 3, 2, 1]) -> [1, 2, 3, 4, 5]
# call: insertion([2147483647, -2147483648, 0]) -> [-2147483648, 0, 2147483647]
# call: is_sorted([1, 1, 2]) -> True
# call: is_sorted([2, 1]) -> False
# call: sort_copy([2, 1]) -> [2, 1, 1, 2]
