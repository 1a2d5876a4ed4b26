def pop_sum(xs: list[int]) -> int:
    return xs.pop() - xs.pop()

def pop_index(xs: list[int]) -> int:
    return xs[xs.pop()]

def pop_arg(xs: list[int]) -> list[int]:
    return [xs.pop(), len(xs), xs.pop(), len(xs)]

# call: pop_sum([1, 2, 10]) -> 8
# call: pop_index([7, 8, 9, 0]) -> 7
# call: pop_index([7, 8, 9, 3]) -> trap index_error
# call: pop_arg([4, 5, 6]) -> [6, 2, 5, 1]
