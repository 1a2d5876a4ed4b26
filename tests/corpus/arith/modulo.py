# Python's % takes the sign of the divisor.
def mod(a: int, b: int) -> int:
    return a % b

# call: mod(7, 3) -> 1
# call: mod(-7, 3) -> 2
# call: mod(7, -3) -> -2
# call: mod(-7, -3) -> -1
# call: mod(6, -3) -> 0
# call: mod(-6, 3) -> 0
# call: mod(0, 5) -> 0
# call: mod(-1, 2147483647) -> 2147483646
# call: mod(2147483647, -2) -> -1
# call: mod(-2147483648, 3) -> 1
# call: mod(-2147483648, 2147483647) -> 2147483646
# call: mod(-2147483648, -1) -> 0
# call: mod(2147483647, 1) -> 0
