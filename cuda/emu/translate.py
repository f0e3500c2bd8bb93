"""Rewrite a CUDA source into C++ that g++ compiles against the usbeam CUDA emulator.

Only the two constructs a host compiler cannot parse are rewritten; everything else is the
CUDA source unchanged (the emulator header supplies the CUDA keywords, built-ins and
intrinsics):

  kernel<T, B><<<grid, block, shared, stream>>>(args)
      -> ::usbeam_emu::Launch(grid, block, shared, stream, "kernel", __FILE__, __LINE__
                              [, max threads from the kernel's __launch_bounds__]).with(kernel<T, B>)(args)
  extern __shared__ [__align__(n)] T name[];
      -> T *const name = (T *)::usbeam_emu::dynamic_shared();

Line numbers are kept (no line is added or removed) so compiler messages and stack traces
point at the CUDA source.  Usage: python translate.py in.cu out.cpp
"""
import re
import sys

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*([^,()]+?)\s*(?:,[^()]*)?\)\s*([A-Za-z_]\w*)\s*\(")
_DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def _kernel_start(text, end):
    """Index where the kernel expression that ends just before `end` begins: an identifier,
    optionally qualified (a::b) and followed by balanced template arguments."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        if depth != 0:
            raise ValueError("unbalanced template arguments before <<<")
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def _split_top_level(config):
    parts, depth, current = [], 0, []
    for ch in config:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def translate(text):
    # A launch with more threads than the kernel's __launch_bounds__ fails on a GPU: the
    # launch passes the bound (an expression visible at the launch site) to the emulator.
    bounds = {m.group(2): m.group(1) for m in _LAUNCH_BOUNDS.finditer(text)}
    text = _DYNAMIC_SHARED.sub(lambda m: f"{m.group(1)} *const {m.group(2)} = "
                               f"({m.group(1)} *)::usbeam_emu::dynamic_shared();", text)
    out, pos = [], 0
    while True:
        start = text.find("<<<", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        close = text.find(">>>", start)
        if close < 0:
            raise ValueError("<<< without >>>")
        k0 = _kernel_start(text, start)
        kernel = text[k0:start].strip()
        config = _split_top_level(text[start + 3:close])
        if not 2 <= len(config) <= 4:
            raise ValueError(f"launch configuration of {kernel}: {config}")
        config += ["0"] * (4 - len(config))
        name = kernel.split("<")[0]
        # Keep the newlines of a multi-line configuration so line numbers stay put.
        newlines = "\n" * text[start:close].count("\n")
        out.append(text[pos:k0])
        bound = f", (int)({bounds[name]})" if name in bounds else ""
        out.append(f"::usbeam_emu::Launch({', '.join(config)}, \"{name}\", __FILE__, __LINE__{bound})"
                   f".with({kernel}){newlines}")
        pos = close + 3


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(f'#line 1 "{src}"\n' + translate(text))
