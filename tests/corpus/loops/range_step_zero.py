def loop(a: int, b: int, s: int) -> int:
    n = 0
    for i in range(a, b, s):
        n += 1
    return n

def after_work(s: int) -> int:
    xs = [1, 2, 3]
    for x in xs:
        xs[0] += x
    for i in range(0, 5, s):
        xs.append(i)
    return len(xs)

# call: loop(0, 10, 0) -> trap value_error
# call: loop(0, 0, 0) -> trap value_error
# call: loop(0, 10, 5) -> 2
# call: after_work(0) -> trap value_error
# call: after_work(2) -> 6
