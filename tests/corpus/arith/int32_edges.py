def min_int() -> int:
    return -2147483647 - 1

def max_int() -> int:
    return 2147483647

def span() -> int:
    return max_int() + min_int()

def big_literal() -> int:
    x = 16777216
    y = 16777215 + 1
    z = -8388608
    return x - y + z

# call: min_int() -> -2147483648
# call: max_int() -> 2147483647
# call: span() -> -1
# call: big_literal() -> -8388608
