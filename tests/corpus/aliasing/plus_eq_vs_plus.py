# 'xs += ys' extends xs in place (aliases see it); 'xs = xs + ys' makes a new list.
def in_place() -> list[int]:
    xs = [1]
    alias = xs
    xs += [2, 3]
    return alias

def new_list() -> list[int]:
    xs = [1]
    alias = xs
    xs = xs + [2, 3]
    return alias

def extend_arg(xs: list[int]) -> int:
    xs += [0]
    return len(xs)

def concat_arg(xs: list[int]) -> int:
    xs = xs + [0]
    return len(xs)

def callers() -> list[int]:
    a = [1, 2]
    extend_arg(a)
    b = [1, 2]
    concat_arg(b)
    return [len(a), len(b)]

def self_extend() -> list[int]:
    xs = [1, 2]
    xs += xs
    return xs

def self_concat() -> list[int]:
    xs = [1, 2]
    ys = xs
    xs = xs + xs
    ys.append(9)
    return xs

# call: in_place() -> [1, 2, 3]
# call: new_list() -> [1]
# call: callers() -> [3, 2]
# call: self_extend() -> [1, 2, 1, 2]
# call: self_concat() -> [1, 2, 1, 2]
