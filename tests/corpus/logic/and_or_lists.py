def first_nonempty(xs: list[int], ys: list[int]) -> list[int]:
    return xs or ys

def both(xs: list[int], ys: list[int]) -> list[int]:
    return xs and ys

def aliased(xs: list[int]) -> int:
    ys = xs or [9]
    ys.append(7)
    return len(xs)

# call: first_nonempty([], [1, 2]) -> [1, 2]
# call: first_nonempty([3], [1, 2]) -> [3]
# call: first_nonempty([], []) -> []
# call: both([], [1]) -> []
# call: both([5], [1]) -> [1]
# call: aliased([1, 2]) -> 3
# call: aliased([]) -> 0
