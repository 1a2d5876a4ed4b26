def mul(a: int, b: int) -> int:
    return a * b

# call: mul(6, 7) -> 42
# call: mul(-6, 7) -> -42
# call: mul(-6, -7) -> 42
# call: mul(0, -2147483647) -> 0
# call: mul(46340, 46340) -> 2147395600
# call: mul(-65536, 32768) -> -2147483648
# call: mul(-2147483647, 1) -> -2147483647
# call: mul(2147483647, -1) -> -2147483647
