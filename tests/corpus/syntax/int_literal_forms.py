# Every int literal form of Python: hex, octal and binary (any case), and underscores between
# digits. Their values are CPython's; one past int32 is still a compile error (int_too_large.py).
def hex_sum() -> int:
    return 0x_7fff_ffff - 0x7FFFFFF0 + 0x10 + 0XfF

def octal_and_binary(x: int) -> int:
    return x * 0o17 + 0O_1 - 0b1010 + 0B_1_1

def big() -> int:
    return 1_000_000 + 2_146_483_000 - 0_0 + 00

def zeros(x: int) -> bool:
    return 0b0 == 0o0 == 0x0 == x

# call: hex_sum() -> 286
# call: octal_and_binary(2) -> 24
# call: big() -> 2147483000
# call: zeros(0) -> True
# call: zeros(1) -> False
