# Literals, '+' and '*' always create new lists.
def literal_per_iteration() -> list[int]:
    keep = []
    first = [0]
    for i in range(3):
        xs = [i]
        if i == 0:
            first = xs
        keep.append(xs[0])
    first.append(99)
    return keep + first

def repeat_copies() -> list[int]:
    xs = [1, 2]
    ys = xs * 1
    ys[0] = 50
    zs = 1 * xs
    zs.append(60)
    return xs + ys + zs

def return_alias(xs: list[int]) -> list[int]:
    return xs

def through_return() -> list[int]:
    xs = [1]
    ys = return_alias(xs)
    ys.append(2)
    return xs

def list_in_aug_target() -> list[int]:
    xs = [1, 2]
    ys = xs
    ys[0] += ys[1]
    return xs

# call: literal_per_iteration() -> [0, 1, 2, 0, 99]
# call: repeat_copies() -> [1, 2, 50, 2, 1, 2, 60]
# call: through_return() -> [1, 2]
# call: list_in_aug_target() -> [3, 2]
