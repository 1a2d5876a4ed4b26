def concat(xs: list[int], ys: list[int]) -> list[int]:
    return xs + ys

def repeat(xs: list[int], n: int) -> list[int]:
    return xs * n

def repeat_left(n: int, xs: list[int]) -> list[int]:
    return n * xs

def zeros(n: int) -> list[int]:
    return [0] * n

def combo() -> list[int]:
    return [1] + [2, 3] * 2 + [] + 2 * [4]

# call: concat([1, 2], [3]) -> [1, 2, 3]
# call: concat([], []) -> []
# call: repeat([1, 2], 3) -> [1, 2, 1, 2, 1, 2]
# call: repeat([1, 2], 0) -> []
# call: repeat([1, 2], -5) -> []
# call: repeat([], 100) -> []
# call: repeat_left(2, [7]) -> [7, 7]
# call: repeat_left(-1, [7]) -> []
# call: zeros(4) -> [0, 0, 0, 0]
# call: combo() -> [1, 2, 3, 2, 3, 4, 4]
