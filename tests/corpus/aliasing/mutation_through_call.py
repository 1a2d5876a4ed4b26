def add_one(xs: list[int]) -> int:
    xs.append(1)
    xs[0] += 100
    return len(xs)

def caller() -> list[int]:
    xs = [0]
    add_one(xs)
    add_one(xs)
    return xs

def rebind_in_callee(xs: list[int]) -> int:
    xs = [42]
    return xs[0]

def caller2() -> list[int]:
    xs = [1, 2, 3]
    rebind_in_callee(xs)
    return xs

def same_list_twice(a: list[int], b: list[int]) -> int:
    a.append(5)
    return len(b)

def caller3() -> int:
    xs = []
    return same_list_twice(xs, xs) * 10 + same_list_twice(xs, [])

# call: caller() -> [200, 1, 1]
# call: caller2() -> [1, 2, 3]
# call: caller3() -> 10
# call: add_one([5]) -> 2
