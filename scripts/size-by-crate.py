#!/usr/bin/env python3
"""Which crates an executable's code and data come from (docs/BENCHMARKS.md, "Desktop app").

Usage: size-by-crate.py BINARY [BINARY ...]   (each unstripped: it reads the symbol table)

For each symbol with a size (`nm --defined-only -S -C`), the crate is the first path segment
of its demangled name; for `<T as Trait>::f` it is T's crate, or the trait's when T is a
standard type, a primitive or a reference; standard generic code instantiated for another
crate's type (`core::ptr::drop_in_place<tokio::...>`) counts for that crate. C symbols are named by their known prefixes
(SQLite, ring's C and assembly). Inlined code counts where it was inlined. Prints, per binary, the
file and section sizes, then the crates by bytes, largest first; with two binaries, the
crates of the second that the first has not, or has less of.
"""
import os, re, subprocess, sys
from collections import Counter

STD = {"core", "alloc", "std", "proc_macro", "hashbrown", "std_detect", "rustc_demangle",
       "addr2line", "gimli", "miniz_oxide", "object", "memchr", "adler2", "panic_unwind"}
C_PREFIXES = [
    ("sqlite3", "libsqlite3-sys (SQLite, C)"),
    ("ring_core_", "ring (C, asm)"),
    ("GFp", "ring (C, asm)"),
    ("aes_hw_", "ring (C, asm)"),
    ("aes_nohw_", "ring (C, asm)"),
    ("vpaes_", "ring (C, asm)"),
    ("gcm_", "ring (C, asm)"),
    ("chacha20_", "ring (C, asm)"),
    ("x25519_", "ring (C, asm)"),
    ("p256_", "ring (C, asm)"),
    ("ecp_nistz256", "ring (C, asm)"),
    ("bn_", "ring (C, asm)"),
    ("fiat_", "ring (C, asm)"),
    ("LIMBS_", "ring (C, asm)"),
    ("CRYPTO_", "ring (C, asm)"),
    ("sha256_block", "ring (C, asm)"),
    ("sha512_block", "ring (C, asm)"),
    ("ChaCha20", "ring (C, asm)"),
    ("bn_mul_mont", "ring (C, asm)"),
]


def split_top(s, sep):
    """Splits s at sep where not inside <...>, (...) or [...]."""
    depth, out, cur, i = 0, [], "", 0
    while i < len(s):
        if s.startswith(sep, i) and depth == 0:
            out.append(cur)
            cur = ""
            i += len(sep)
            continue
        c = s[i]
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        cur += c
        i += 1
    out.append(cur)
    return out


def crate_of_path(p):
    p = p.strip()
    while p.startswith(("&", "*const ", "*mut ", "mut ", "dyn ", "impl ")):
        p = re.sub(r"^(&(mut )?|\*const |\*mut |mut |dyn |impl )", "", p)
    if p.startswith("<"):
        return crate_of_symbol(p)
    if p.startswith(("(", "[", "fn(")) or "::" not in p:
        return None  # a primitive, tuple, slice or array
    return p.split("::", 1)[0]


def crate_of_symbol(name):
    if name.startswith("<"):
        # Find the matching '>' of the leading '<'.
        depth = 0
        for i, c in enumerate(name):
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
                if depth == 0:
                    inner = name[1:i]
                    break
        else:
            return "[unknown]"
        parts = split_top(inner, " as ")
        own = crate_of_path(parts[0])
        if own and own not in STD:
            return own
        if len(parts) > 1:
            trait = crate_of_path(parts[1])
            if trait:
                return trait
        return own or "[unknown]"
    if "::" in name:
        return name.split("::", 1)[0]
    for prefix, crate in C_PREFIXES:
        if name.startswith(prefix):
            return crate
    return "[C and other, unnamed]"


def sections(binary):
    out = subprocess.run(["size", "-A", binary], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].startswith(".") and f[1].isdigit():
            sizes[f[0]] = int(f[1])
    return sizes


def by_crate(binary):
    out = subprocess.run(["nm", "--defined-only", "-S", "-C", binary],
                         capture_output=True, text=True, check=True).stdout
    sizes = Counter()
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ ([0-9a-f]+) \S (.*)$", line)
        if not m:
            continue  # no size
        size = int(m.group(1), 16)
        name = re.sub(r"::h[0-9a-f]{16}$", "", m.group(2))
        crate = crate_of_symbol(name)
        if crate in STD:
            # Standard generic code instantiated for another crate's type
            # (core::ptr::drop_in_place<tokio::...>, alloc::sync::Arc<rtc::...>::drop_slow):
            # that crate's.
            for m in re.finditer(r"(?:^|[<\s&(,\[*])([a-z_][a-z0-9_]*)::", name[name.find("<"):] if "<" in name else ""):
                if m.group(1) not in STD:
                    crate = m.group(1)
                    break
        if crate in STD:
            crate = "std (core, alloc, std; generic code of all crates)"
        sizes[crate] += size
    return sizes


def main():
    results = []
    for b in sys.argv[1:]:
        secs = sections(b)
        crates = by_crate(b)
        results.append(crates)
        total = sum(crates.values())
        print(f"## {b}")
        print(f"file {os.path.getsize(b) / 1e6:.2f} MB; .text {secs.get('.text', 0) / 1e6:.2f} MB, "
              f".rodata {secs.get('.rodata', 0) / 1e6:.2f} MB, .eh_frame {secs.get('.eh_frame', 0) / 1e6:.2f} MB, "
              f".data.rel.ro {secs.get('.data.rel.ro', 0) / 1e6:.2f} MB; symbols with a size {total / 1e6:.2f} MB")
        print("| crate | MB |")
        print("|---|---:|")
        for crate, size in crates.most_common(int(os.environ.get("TOP", "45"))):
            print(f"| {crate} | {size / 1e6:.2f} |")
        print()
    if len(results) == 2:
        a, b = results
        diff = Counter({k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0) > 0})
        print(f"## what the second has over the first: {sum(diff.values()) / 1e6:.2f} MB in symbols")
        print("| crate | MB |")
        print("|---|---:|")
        for crate, size in diff.most_common(int(os.environ.get("TOP", "45"))):
            print(f"| {crate} | {size / 1e6:.2f} |")


if __name__ == "__main__":
    main()
