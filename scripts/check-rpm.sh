#!/usr/bin/env bash
# Checks Outpost's .rpm as far as a Debian machine can (docs/PACKAGING.md, "The .rpm"), with
# Debian's `rpm` package: no RPM distribution and no RPM repository are at hand.
#
# Usage: scripts/check-rpm.sh PATH/outpost-VERSION-1.ARCH.rpm
#
# 1. The header: name `outpost`, the workspace's version, the files (the four programs, the
#    desktop entry, the icons) and no install scriptlets.
# 2. Requires against the programs: every shared library an ELF file in the package needs
#    (readelf NEEDED) must be declared as `SONAME()(64bit)`, or be a direct NEEDED of a
#    declared library (checked on this machine's copy of it), or be glibc's / libgcc's.
# 3. An install into an empty root (`rpm --root DIR -i --nodeps`: the root has no other
#    package, so nothing could satisfy a dependency): every file where the header says,
#    `rpm -V` finds them intact, the installed CLI runs (`outpost --help`, with this machine's
#    libraries), and `rpm -e` removes every file again.
# What it does not prove: that dnf/zypper resolve the Requires on Fedora or openSUSE, or that
# programs built on Debian 12 run there (the glibc they need is printed).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
rpm_file="$(realpath "${1:?usage: scripts/check-rpm.sh PATH.rpm}")"
fail() { echo "check-rpm: FAIL: $*" >&2; exit 1; }
say() { echo "check-rpm: $*" >&2; }
command -v rpm >/dev/null || fail "the rpm tool is missing (apt-get install rpm)"

version="$(cd "$repo" && cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "outpost-app"))')"
q() { rpm -qp --nosignature "$@" "$rpm_file" 2>/dev/null; }

# 1. Header.
nv="$(q --queryformat '%{NAME} %{VERSION}')"
[ "$nv" = "outpost $version" ] || fail "name and version are '$nv', want 'outpost $version'"
expected_files="/usr/bin/outpost
/usr/bin/outpost-agent
/usr/bin/outpost-app
/usr/bin/outpost-room
/usr/share/applications/Outpost.desktop
/usr/share/icons/hicolor/128x128/apps/outpost-app.png
/usr/share/icons/hicolor/256x256@2/apps/outpost-app.png
/usr/share/icons/hicolor/32x32/apps/outpost-app.png
/usr/share/icons/hicolor/512x512/apps/outpost-app.png"
files="$(q -l | sort)"
[ "$files" = "$expected_files" ] || fail "files differ from the expected list:
$(diff <(echo "$expected_files") <(echo "$files") || true)"
scripts="$(q --scripts)"
[ -z "$scripts" ] || fail "unexpected scriptlets: $scripts"
requires="$(q -R)"
say "outpost $version: the $(echo "$files" | wc -l) expected files, no scriptlets; Requires: $(echo "$requires" | grep -v '^rpmlib(' | tr '\n' ' ')"

# 2. Requires cover every library the programs need.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/payload"
# Through a file, not a pipe: tar stops reading at the archive's end marker, and with
# pipefail the writer's SIGPIPE on the padding after it would end this script (rc 141).
rpm2archive - < "$rpm_file" > "$work/payload.tgz"
tar -xzf "$work/payload.tgz" -C "$work/payload"
base_libs=" libc.so.6 libm.so.6 libgcc_s.so.1 ld-linux-x86-64.so.2 libpthread.so.0 libdl.so.2 librt.so.1 "
needed_of() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
declared=()
covered=" "
while read -r r; do
  case "$r" in
    *.so*"()(64bit)")
      soname="${r%%()*}"
      declared+=("$soname")
      covered+="$soname "
      # awk reads all of ldconfig's list (no early exit: that would be a SIGPIPE for ldconfig).
      lib="$(ldconfig -p | awk -v l="$soname" '$1 == l && /x86-64/ && !found {print $NF; found = 1}')"
      [ -n "$lib" ] || fail "declared $soname is not on this machine to check what it brings"
      for n in $(needed_of "$lib"); do covered+="$n "; done
      ;;
  esac
done <<< "$requires"
glibc_max=""
for f in $(find "$work/payload" -type f); do
  case "$(file -b "$f")" in ELF*) ;; *) continue ;; esac
  for n in $(needed_of "$f"); do
    case "$base_libs $covered" in
      *" $n "*) ;;
      *) fail "${f#"$work/payload"} needs $n, which the .rpm neither requires nor gets through ${declared[*]}" ;;
    esac
  done
  g="$(objdump -T "$f" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
  glibc_max="$(printf '%s\n%s\n' "$glibc_max" "$g" | sort -V | tail -n 1)"
done
say "every library the programs need is required or comes with one that is; they need glibc ${glibc_max#GLIBC_} or newer"

# 3. Install into an empty root, verify, run, remove.
root="$work/root"
mkdir "$root"
rpm_root=(rpm --root "$root" --dbpath /var/lib/rpm)
"${rpm_root[@]}" --initdb
"${rpm_root[@]}" -i --nodeps --nosignature "$rpm_file" 2>/dev/null || fail "rpm -i into an empty root failed"
[ "$("${rpm_root[@]}" -qa)" = "$(q --queryformat '%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}')" ] \
  || fail "the root's rpm database does not hold exactly this package"
while read -r f; do
  [ -f "$root$f" ] || fail "$f is not installed"
done <<< "$expected_files"
for b in outpost outpost-app outpost-room outpost-agent; do
  [ -x "$root/usr/bin/$b" ] || fail "/usr/bin/$b is not executable"
done
"${rpm_root[@]}" -V --nodeps outpost || fail "rpm -V: installed files differ from the package"
grep -qx 'Exec=outpost-app' "$root/usr/share/applications/Outpost.desktop" \
  || fail "the desktop entry does not start outpost-app"
"$root/usr/bin/outpost" --help >/dev/null || fail "the installed outpost --help failed"
"${rpm_root[@]}" -e --nodeps outpost || fail "rpm -e failed"
"${rpm_root[@]}" -q outpost >/dev/null 2>&1 && fail "rpm still knows outpost after rpm -e"
left="$(find "$root" -path "$root/var/lib/rpm" -prune -o -type f -print)"
[ -z "$left" ] || fail "files left after rpm -e: $left"
say "installed into an empty root (rpm -i --nodeps), verified (rpm -V), ran outpost --help, removed (rpm -e): no file left"
say "ok: $rpm_file"
