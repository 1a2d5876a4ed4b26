def prefix(xs: list[int]) -> list[int]:
    out = [0]
    for x in xs:
        out.append(out[-1] + x)
    return out

def range_sum(xs: list[int], lo: int, hi: int) -> int:
    p = prefix(xs)
    return p[hi] - p[lo]

def in_place(xs: list[int]) -> list[int]:
    for i in range(1, len(xs)):
        xs[i] += xs[i - 1]
    return xs

# call: prefix([1, 2, 3]) -> [0, 1, 3, 6]
# call: prefix([]) -> [0]
# call: range_sum([5, -2, 7, 1], 1, 3) -> 5
# call: in_place([1, 1, 1, 1]) -> [1, 2, 3, 4]
