def is_pos(x: int) -> bool:
    return x > 0

def count_pos(xs: list[int]) -> int:
    n = 0
    for x in xs:
        if is_pos(x):
            n += 1
    return n

def flip(b: bool) -> bool:
    return not b

def squares(n: int) -> list[int]:
    return build(n)

def build(n: int) -> list[int]:
    out = []
    for i in range(n):
        out.append(i * i)
    return out

# call: is_pos(0) -> False
# call: count_pos([1, -1, 2, 0]) -> 2
# call: flip(False) -> True
# call: build(4) -> [0, 1, 4, 9]
