def steps(n: int) -> int:
    count = 0
    while n != 1:
        if n % 2 == 0:
            n //= 2
        else:
            n = 3 * n + 1
        count += 1
    return count

def longest(limit: int) -> int:
    best = 1
    best_steps = 0
    for n in range(1, limit):
        s = steps(n)
        if s > best_steps:
            best, best_steps = n, s
    return best

# call: steps(1) -> 0
# call: steps(6) -> 8
# call: steps(27) -> 111
# call: longest(30) -> 27
