def seven() -> int:
    return 7

def empty() -> list[int]:
    return []

def yes() -> bool:
    return True

def use() -> int:
    return seven() + len(empty()) + (1 if yes() else 0)

# call: seven() -> 7
# call: empty() -> []
# call: yes() -> True
# call: use() -> 8
