def absolute(a: int) -> int:
    return abs(a)

def smaller(a: int, b: int) -> int:
    return min(a, b)

def larger(a: int, b: int) -> int:
    return max(a, b)

def clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(x, hi))

# call: absolute(-7) -> 7
# call: absolute(7) -> 7
# call: absolute(0) -> 0
# call: absolute(-2147483647) -> 2147483647
# call: smaller(-3, 2) -> -3
# call: smaller(-2147483648, 2147483647) -> -2147483648
# call: larger(-3, 2) -> 2
# call: larger(5, 5) -> 5
# call: clamp(15, 0, 10) -> 10
# call: clamp(-15, 0, 10) -> 0
# call: clamp(4, 0, 10) -> 4
