def total(xs: list[int]) -> int:
    s = 0
    for x in xs:
        s += x
    return s

def evens(xs: list[int]) -> list[int]:
    out = []
    for x in xs:
        if x % 2 == 0:
            out.append(x)
    return out

def first_negative(xs: list[int]) -> int:
    for x in xs:
        if x < 0:
            return x
    return 0

def over_literal() -> int:
    p = 1
    for x in [2, 3, 7]:
        p *= x
    return p

# call: total([1, 2, 3, 4]) -> 10
# call: total([]) -> 0
# call: evens([1, 2, 3, 4, -6]) -> [2, 4, -6]
# call: first_negative([3, -1, -5]) -> -1
# call: first_negative([3]) -> 0
# call: over_literal() -> 42
