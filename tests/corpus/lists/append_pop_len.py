def build(n: int) -> list[int]:
    xs = []
    for i in range(n):
        xs.append(i * 2)
    return xs

def pop_last(xs: list[int]) -> int:
    v = xs.pop()
    return v * 10 + len(xs)

def stack_ops() -> list[int]:
    xs = [1]
    xs.append(2)
    xs.append(3)
    a = xs.pop()
    xs.append(a + xs.pop())
    return xs

def len_after(xs: list[int]) -> int:
    xs.append(len(xs))
    xs.append(len(xs))
    return len(xs)

# call: build(5) -> [0, 2, 4, 6, 8]
# call: build(0) -> []
# call: pop_last([4, 5, 6]) -> 62
# call: stack_ops() -> [1, 5]
# call: len_after([]) -> 2
# call: len_after([9, 9, 9]) -> 5
