def get(xs: list[int], i: int) -> int:
    return xs[i]

def put(xs: list[int], i: int) -> int:
    xs[i] = 1
    return xs[0]

def pop_empty(n: int) -> int:
    xs = [1, 2]
    for i in range(n):
        xs.pop()
    return len(xs)

def aug_out_of_range(i: int) -> int:
    xs = [1, 2]
    xs[i] += 1
    return xs[0]

# call: get([5, 6, 7], 3) -> trap index_error
# call: get([5, 6, 7], -4) -> trap index_error
# call: get([], 0) -> trap index_error
# call: get([], -1) -> trap index_error
# call: get([1], 2147483647) -> trap index_error
# call: get([1], -2147483648) -> trap index_error
# call: put([5, 6, 7], 3) -> trap index_error
# call: put([5, 6, 7], -3) -> 1
# call: put([5, 6, 7], -4) -> trap index_error
# call: pop_empty(2) -> 0
# call: pop_empty(3) -> trap index_error
# call: aug_out_of_range(2) -> trap index_error
# call: aug_out_of_range(-2) -> 2
