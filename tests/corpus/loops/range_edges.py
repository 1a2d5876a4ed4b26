# The counter must not overflow when it steps past the int32 range.
def last(a: int, b: int, s: int) -> int:
    r = 0
    n = 0
    for i in range(a, b, s):
        r = i
        n += 1
    return r * 0 + n

def top(n: int) -> int:
    k = 0
    for i in range(2147483647 - n, 2147483647):
        k += 1
    return k

# call: last(2147483600, 2147483647, 10) -> 5
# call: last(-2147483600, -2147483648, -10) -> 5
# call: last(0, 2147483647, 1073741824) -> 2
# call: last(2147483647, -2147483648, -2147483647) -> 3
# call: top(3) -> 3
