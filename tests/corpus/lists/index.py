def get(xs: list[int], i: int) -> int:
    return xs[i]

def literal_index(i: int) -> int:
    return [10, 20, 30][i]

def nested_index(xs: list[int]) -> int:
    return xs[xs[0]]

# call: get([5, 6, 7], 0) -> 5
# call: get([5, 6, 7], 2) -> 7
# call: get([5, 6, 7], -1) -> 7
# call: get([5, 6, 7], -3) -> 5
# call: literal_index(1) -> 20
# call: literal_index(-2) -> 20
# call: nested_index([2, 0, 9]) -> 9
