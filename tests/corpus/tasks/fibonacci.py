def fib(n: int) -> int:
    a, b = 0, 1
    for i in range(n):
        a, b = b, a + b
    return a

def fibs(n: int) -> list[int]:
    out = [0, 1]
    while len(out) < n:
        out.append(out[-1] + out[-2])
    return out

# call: fib(0) -> 0
# call: fib(20) -> 6765
# call: fibs(8) -> [0, 1, 1, 2, 3, 5, 8, 13]
# call: fibs(1) -> [0, 1]
