# Python's floor division rounds toward negative infinity, not toward zero.
def div(a: int, b: int) -> int:
    return a // b

# call: div(7, 2) -> 3
# call: div(-7, 2) -> -4
# call: div(7, -2) -> -4
# call: div(-7, -2) -> 3
# call: div(6, -3) -> -2
# call: div(-6, 3) -> -2
# call: div(0, -5) -> 0
# call: div(1, 2147483647) -> 0
# call: div(-1, 2147483647) -> -1
# call: div(-2147483647, 2) -> -1073741824
# call: div(2147483647, -1) -> -2147483647
# call: div(-2147483648, 1) -> -2147483648
# call: div(-2147483648, 2) -> -1073741824
# call: div(-2147483648, -2) -> 1073741824
# call: div(-2147483648, 2147483647) -> -2
