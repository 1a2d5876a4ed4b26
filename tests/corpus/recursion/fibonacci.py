def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

# call: fib(0) -> 0
# call: fib(1) -> 1
# call: fib(10) -> 55
# call: fib(15) -> 610
