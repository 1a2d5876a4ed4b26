def sixteen(a: int, b: int, c: int, d: int, e: int, f: int, g: int, h: int,
            i: int, j: int, k: int, l: int, m: int, n: int, o: int, p: int) -> int:
    return a - b + c - d + e - f + g - h + i - j + k - l + m - n + o - p * 1000

def call_sixteen() -> int:
    return sixteen(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)

def mixed(flag: bool, xs: list[int], k: int,) -> int:
    if flag:
        return xs[k]
    return -xs[k]

# call: call_sixteen() -> -15992
# call: sixteen(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1) -> -1000
# call: mixed(True, [4, 5], 1) -> 5
# call: mixed(False, [4, 5], -2) -> -4
