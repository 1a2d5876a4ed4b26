def sum_from(xs: list[int], i: int) -> int:
    if i == len(xs):
        return 0
    return xs[i] + sum_from(xs, i + 1)

def fill(xs: list[int], n: int) -> list[int]:
    if n == 0:
        return xs
    xs.append(n)
    return fill(xs, n - 1)

def hanoi(n: int, moves: list[int]) -> int:
    if n == 0:
        return 0
    hanoi(n - 1, moves)
    moves.append(n)
    hanoi(n - 1, moves)
    return len(moves)

# call: sum_from([1, 2, 3, 4], 0) -> 10
# call: fill([], 4) -> [4, 3, 2, 1]
# call: hanoi(4, []) -> 15
