def swap(a: int, b: int) -> list[int]:
    a, b = b, a
    return [a, b]

def fib(n: int) -> int:
    a, b = 0, 1
    for i in range(n):
        a, b = b, a + b
    return a

def swap_items(xs: list[int], i: int, j: int) -> list[int]:
    xs[i], xs[j] = xs[j], xs[i]
    return xs

def rotate3(a: int, b: int, c: int) -> list[int]:
    (a, b, c) = (b, c, a)
    return [a, b, c]

def trailing(a: int) -> int:
    x, y, = a, a + 1,
    return x * 10 + y

# call: swap(1, 2) -> [2, 1]
# call: fib(10) -> 55
# call: fib(45) -> 1134903170
# call: fib(46) -> trap overflow
# call: swap_items([1, 2, 3], 0, 2) -> [3, 2, 1]
# call: swap_items([1, 2, 3], -1, 0) -> [3, 2, 1]
# call: swap_items([1, 2, 3], 1, 1) -> [1, 2, 3]
# call: swap_items([1, 2, 3], 0, 3) -> trap index_error
# call: rotate3(1, 2, 3) -> [2, 3, 1]
# call: trailing(4) -> 45
