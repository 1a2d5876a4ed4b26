def f(n: int) -> int:
    b = True
    for b in range(n):
        pass
    return n
# error: 3:9 type mismatch
