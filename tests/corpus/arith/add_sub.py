def add(a: int, b: int) -> int:
    return a + b

def sub(a: int, b: int) -> int:
    return a - b

def mixed(a: int, b: int, c: int) -> int:
    return a - b + c - 1

# call: add(1, 2) -> 3
# call: add(-5, 3) -> -2
# call: add(2147483646, 1) -> 2147483647
# call: add(-2147483647, -1) -> -2147483648
# call: sub(3, 10) -> -7
# call: sub(-2147483647, 1) -> -2147483648
# call: sub(0, -2147483647) -> 2147483647
# call: mixed(10, 4, 3) -> 8
