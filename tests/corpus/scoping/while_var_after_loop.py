def f(n: int) -> int:
    while n > 0:
        last = n
        n -= 1
    return last
# error: 5:12 undefined name
