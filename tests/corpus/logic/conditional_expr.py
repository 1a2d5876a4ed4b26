def sign(x: int) -> int:
    return -1 if x < 0 else 1 if x > 0 else 0

def choose(c: bool, xs: list[int], ys: list[int]) -> list[int]:
    return xs if c else ys

def lazy(xs: list[int]) -> int:
    return xs[0] if len(xs) > 0 else 0

def as_bool(x: int) -> bool:
    return True if x else False

def nested(a: int, b: int) -> int:
    return (a if a > b else b) * (1 if a == b else 2)

# call: sign(-5) -> -1
# call: sign(5) -> 1
# call: sign(0) -> 0
# call: choose(True, [1], [2]) -> [1]
# call: choose(False, [1], [2]) -> [2]
# call: lazy([]) -> 0
# call: lazy([7, 8]) -> 7
# call: as_bool(2) -> True
# call: as_bool(0) -> False
# call: nested(3, 3) -> 3
# call: nested(2, 9) -> 18
