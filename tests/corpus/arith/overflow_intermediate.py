# Every intermediate result must fit, even when the final value would.
def up_down(a: int) -> int:
    return a + 1 - 1

def square_then_divide(a: int) -> int:
    return a * a // a

def sum_all(n: int) -> int:
    s = 0
    i = 0
    while i < n:
        s += 1000000000
        i += 1
    return s

# call: up_down(2147483646) -> 2147483646
# call: up_down(2147483647) -> trap overflow
# call: square_then_divide(46340) -> 46340
# call: square_then_divide(50000) -> trap overflow
# call: sum_all(2) -> 2000000000
# call: sum_all(3) -> trap overflow
