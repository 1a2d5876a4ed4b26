def helper(xs: list[int]) -> int:
    xs.append(1)
    return 5

def body(x: int) -> int:
    if x > 0:
        pass
    else:
        pass
    while x > 100:
        pass
    x + 1
    x == 2
    xs = [x]
    helper(xs)
    helper(xs) + helper(xs)
    xs.pop()
    len(xs)
    return len(xs)

# call: body(3) -> 3
# call: body(-3) -> 3
