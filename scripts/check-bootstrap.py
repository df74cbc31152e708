#!/usr/bin/env python3
"""Checks that a Lambda bootstrap (or a bootstrap.zip) can run on provided.al2023.

Reads the ELF file itself (no readelf needed: only Python's standard library), 64-bit
little-endian only (x86_64 and arm64 Lambda):

- the ELF machine is the architecture asked for (x86_64 = EM_X86_64, arm64 = EM_AARCH64);
- it is static, or dynamically linked only against libraries every al2023 image has: glibc's
  own (libc.so.6, libm.so.6, libpthread.so.0, libdl.so.2, librt.so.1, libutil.so.1, the
  ld-linux loader) and libgcc_s.so.1 (Rust's unwinder); never libssl/libcrypto (OpenSSL is
  vendored and linked statically) nor anything else;
- its interpreter is the architecture's glibc loader;
- the highest GLIBC_x.y symbol version it needs is at most --max-glibc (al2023: 2.34);
- for a zip: it holds exactly one file, `bootstrap`, with its executable bits set;
- one TLS and crypto stack: no rustls or aws-lc compiled in beside OpenSSL;
- OpenSSL configured by .cargo/openssl-configure-perl (issue 29): none of the parts it leaves
  out is compiled in, each found by a marker (`TRIMMED`): the 512 KiB table of precomputed SM2
  points (arm64 builds have one without `no-sm2-precomp`), QUIC, ML-DSA, DES;
- a function named by its folder (`<target dir>/lambda/<function>/bootstrap.zip`, as `make
  package` writes them) links the AWS SDKs it calls and no other (`CALLS`), each found by a
  string its SDK compiles in (`AWS_APIS`).

Prints one line per file; exits 1 when any check fails, 2 on bad usage or an unreadable file.
"""

import argparse
import io
import re
import struct
import sys
import zipfile

MACHINES = {"x86_64": 62, "arm64": 183}
MACHINE_NAMES = {62: "x86_64", 183: "arm64 (aarch64)", 3: "x86 (i386)", 40: "arm (32-bit)"}
INTERPRETERS = {
    "x86_64": {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-x86-64.so.2"},
    "arm64": {"/lib/ld-linux-aarch64.so.1", "/lib64/ld-linux-aarch64.so.1"},
}
# What al2023's base image (and so the provided.al2023 runtime) has: glibc and libgcc.
ALLOWED = {
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF


class ElfError(Exception):
    """The file is not an ELF file this checker reads."""


def _cstr(data, offset):
    end = data.find(b"\0", offset)
    if end < 0:
        raise ElfError(f"unterminated string at {offset:#x}")
    return data[offset:end].decode("utf-8", "replace")


def parse(data):
    """The facts the checks need: machine, type, interpreter, NEEDED libraries, and the
    symbol versions required from each library (.gnu.version_r, read through the dynamic
    segment, so a stripped binary works too)."""
    if data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    (e_phoff,) = struct.unpack_from("<Q", data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    segments = []
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize
        )
        segments.append((p_type, p_offset, p_vaddr, p_filesz))

    def file_offset(vaddr):
        for p_type, p_offset, p_vaddr, p_filesz in segments:
            if p_type == PT_LOAD and p_vaddr <= vaddr < p_vaddr + p_filesz:
                return vaddr - p_vaddr + p_offset
        raise ElfError(f"address {vaddr:#x} is in no loaded segment")

    info = {
        "machine": e_machine,
        "pie": e_type == 3,
        "interpreter": None,
        "dynamic": False,
        "needed": [],
        "versions": {},
    }
    for p_type, p_offset, _vaddr, p_filesz in segments:
        if p_type == PT_INTERP:
            info["interpreter"] = _cstr(data[p_offset : p_offset + p_filesz], 0)
        if p_type != PT_DYNAMIC:
            continue
        info["dynamic"] = True
        tags = []
        for off in range(p_offset, p_offset + p_filesz, 16):
            d_tag, d_val = struct.unpack_from("<qQ", data, off)
            if d_tag == DT_NULL:
                break
            tags.append((d_tag, d_val))
        values = dict(tags)
        if DT_STRTAB not in values:
            continue
        strtab = file_offset(values[DT_STRTAB])
        info["needed"] = [_cstr(data, strtab + v) for t, v in tags if t == DT_NEEDED]
        if DT_VERNEED in values:
            off = file_offset(values[DT_VERNEED])
            for _ in range(values.get(DT_VERNEEDNUM, 0)):
                _ver, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, off)
                names = info["versions"].setdefault(_cstr(data, strtab + vn_file), [])
                aux = off + vn_aux
                for _ in range(vn_cnt):
                    _hash, _vflags, _other, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
                    names.append(_cstr(data, strtab + vna_name))
                    if not vna_next:
                        break
                    aux += vna_next
                if not vn_next:
                    break
                off += vn_next
    return info


def version_key(text):
    return tuple(int(part) for part in text.split("."))


# glibc's symbol versions that are not GLIBC_<x.y>, with the release that introduced them: a
# binary needing one of these needs at least that glibc (GLIBC_ABI_DT_RELR: the packed
# relocations of `-z pack-relative-relocs`, glibc 2.36). Any other GLIBC_* name (GLIBC_PRIVATE,
# one from a future glibc) is refused as unknown.
GLIBC_ABI_VERSIONS = {"GLIBC_ABI_DT_RELR": "2.36"}


def glibc_versions(info):
    """(the glibc releases the binary's versioned symbols need, the unknown GLIBC_* names)."""
    found, unknown = set(), set()
    for names in info["versions"].values():
        for name in names:
            m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)+)", name)
            if m:
                found.add(m.group(1))
            elif name in GLIBC_ABI_VERSIONS:
                found.add(GLIBC_ABI_VERSIONS[name])
            elif name.startswith("GLIBC_"):
                unknown.add(name)
    return sorted(found, key=version_key), sorted(unknown)


# A string each AWS SDK compiles in: its JSON protocol's target prefix or its REST path.
AWS_APIS = {
    "secretsmanager": b"secretsmanager.GetSecretValue",
    "kms": b"TrentService.",
    "lambda": b"/2015-03-31/functions/",
    "sqs": b"AmazonSQS.",
    "eventbridge": b"AWSEvents.",
    # aws-config's default credential chain (profiles' assumed roles and web identity, SSO):
    # the functions read the environment alone (shared::aws::from_environment); only the
    # operator CLI links these.
    "sts": b"STS.AssumeRole",
    "sso": b"SSO.GetRoleCredentials",
    "sso-oidc": b"SSO OIDC.CreateToken",
}
# The AWS APIs each function calls (issue 29): Secrets Manager for its configuration; KMS
# where payloads or responses are sealed or opened; Lambda where the worker's doorbell rings
# (the receiver, replay's deferred claims); SQS and EventBridge where the outbox dispatches.
CALLS = {
    "receiver": {"secretsmanager", "kms", "lambda"},
    "worker": {"secretsmanager", "kms", "sqs", "eventbridge"},
    "sweeper": {"secretsmanager"},
    "auditor": {"secretsmanager"},
    "replay": {"secretsmanager", "kms", "lambda"},
    "migrate": {"secretsmanager"},
    "console": {"secretsmanager", "kms"},
}
# Another TLS or crypto stack than OpenSSL (the AWS SDK's default client brought both).
OTHER_STACKS = {"rustls": b"rustls", "aws-lc": b"aws-lc"}
# The first point of OpenSSL's precomputed SM2 table (crypto/ec/ecp_sm2p256_table.c: the
# curve's generator, x then y, as four little-endian 64-bit words each), which only that table
# and the SM2 code beside it hold in this form; the curve's parameters elsewhere are big-endian.
SM2_TABLE = struct.pack(
    "<8Q",
    0x715A4589334C74C7, 0x8FE30BBFF2660BE1, 0x5F9904466A39C994, 0x32C4AE2C1F198119,
    0x02DF32E52139F0A0, 0xD0A9877CC62A4740, 0x59BDCEE36B692153, 0xBC3736A2F4F6779C,
)
# Parts of OpenSSL that .cargo/openssl-configure-perl's Configure options leave out: (what,
# the option, a marker only that part compiles in). One per kind of part: a table, a transport
# (a format string of QUIC's), an algorithm provider (its provider name list, colon-separated:
# the object names table elsewhere holds each name alone). Any of them present means the shim
# did not take effect, and every other option with it.
TRIMMED = [
    ("OpenSSL's precomputed SM2 table (512 KiB)", "no-sm2-precomp", SM2_TABLE),
    ("OpenSSL's QUIC", "no-quic", b'QUIC error code: 0x%llx%s%s%s, reason: "%s"'),
    ("OpenSSL's ML-DSA", "no-ml-dsa", b"ML-DSA-65:MLDSA65:"),
    ("OpenSSL's DES", "no-des", b"DES-EDE3-CBC:DES3:"),
]


def linked_apis(data):
    """The AWS APIs whose SDK is compiled into `data`, sorted."""
    return sorted(name for name, marker in AWS_APIS.items() if marker in data)


def function_of(path):
    """The function a `<...>/lambda/<function>/bootstrap(.zip)` path names, or None."""
    parts = path.replace("\\", "/").split("/")
    if len(parts) >= 2 and parts[-2] in CALLS:
        return parts[-2]
    return None


def check(data, arch, max_glibc, function=None):
    """(problems, description) for one bootstrap's bytes."""
    info = parse(data)
    problems = []
    want = MACHINES[arch]
    if info["machine"] != want:
        got = MACHINE_NAMES.get(info["machine"], f"e_machine {info['machine']}")
        problems.append(f"built for {got}, not {arch}")
    needed = info["needed"]
    for lib in needed:
        if re.match(r"lib(ssl|crypto)\.so", lib):
            problems.append(f"links {lib} (OpenSSL must be vendored and static)")
        elif lib not in ALLOWED:
            problems.append(f"links {lib}, which al2023's base image does not have")
    interp = info["interpreter"]
    if interp is not None and interp not in INTERPRETERS[arch]:
        problems.append(f"interpreter {interp} is not {arch}'s glibc loader")
    versions, unknown = glibc_versions(info)
    for name in unknown:
        problems.append(f"needs {name}, a glibc symbol version this check does not know")
    abi = sorted({n for names in info["versions"].values() for n in names if n in GLIBC_ABI_VERSIONS})
    for name in abi:
        if version_key(GLIBC_ABI_VERSIONS[name]) > version_key(max_glibc):
            problems.append(f"needs {name} (glibc {GLIBC_ABI_VERSIONS[name]}) > {max_glibc}")
    highest = versions[-1] if versions else None
    if highest and version_key(highest) > version_key(max_glibc):
        newer = [v for v in versions if version_key(v) > version_key(max_glibc)]
        problems.append(
            f"needs GLIBC_{highest} > {max_glibc} (symbols versioned {', '.join('GLIBC_' + v for v in newer)})"
        )

    if interp is None and not needed:
        kind = "static executable" + (" (static-pie)" if info["pie"] else "")
    else:
        kind = "dynamically linked glibc " + ("PIE executable" if info["pie"] else "executable")
        kind += f", interpreter {interp}" if interp else ", no interpreter"
    parts = [f"ELF 64-bit {MACHINE_NAMES.get(info['machine'], info['machine'])}", kind]
    if needed:
        parts.append("needs " + " ".join(needed))
    parts.append(f"highest glibc symbol version GLIBC_{highest}" if highest else "no glibc symbol versions")
    others = sorted({n for names in info["versions"].values() for n in names if not n.startswith("GLIBC_")})
    if others:
        parts.append("also " + " ".join(others))
    ssl = re.search(rb"OpenSSL (\d+\.\d+\.\d+)", data)
    if ssl:
        parts.append(f"OpenSSL {ssl.group(1).decode()} compiled in")
    for name, marker in OTHER_STACKS.items():
        if marker in data:
            problems.append(f"{name} is compiled in beside OpenSSL (one TLS stack only)")
    for what, option, marker in TRIMMED:
        if marker in data:
            problems.append(
                f"{what} is compiled in: its Configure did not get {option} "
                "(.cargo/openssl-configure-perl, OPENSSL_SRC_PERL in .cargo/config.toml; "
                "in an existing target directory, `cargo clean -p openssl-sys` once)"
            )
    apis = linked_apis(data)
    parts.append("AWS APIs " + (", ".join(apis) if apis else "none"))
    if function is not None:
        extra = sorted(set(apis) - CALLS[function])
        missing = sorted(CALLS[function] - set(apis))
        if extra:
            problems.append(f"{function} links the SDK of {', '.join(extra)}, which it never calls")
        if missing:
            problems.append(f"{function} lacks the SDK of {', '.join(missing)}, which it calls")
    return problems, "; ".join(parts)


def read_target(path):
    """The bootstrap's bytes, and problems with its packaging (for a zip)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"PK\x03\x04":
        return data, []
    problems = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        if names != ["bootstrap"]:
            problems.append(f"zip holds {names}, not just bootstrap")
        if "bootstrap" not in names:
            return None, problems
        entry = z.getinfo("bootstrap")
        mode = entry.external_attr >> 16
        if entry.create_system != 3 or mode & 0o111 != 0o111:
            problems.append(f"bootstrap in the zip is not executable (mode {mode:o})")
        return z.read("bootstrap"), problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", required=True, choices=sorted(MACHINES))
    ap.add_argument("--max-glibc", default="2.34", help="highest GLIBC_x.y allowed (al2023: 2.34)")
    ap.add_argument("files", nargs="+", metavar="FILE", help="a bootstrap or a bootstrap.zip")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"\d+(\.\d+)+", args.max_glibc):
        ap.error(f"--max-glibc {args.max_glibc!r} is not a version like 2.34")
    failed = False
    for path in args.files:
        try:
            data, problems = read_target(path)
            description = ""
            if data is not None:
                more, description = check(data, args.arch, args.max_glibc, function_of(path))
                problems += more
        except (OSError, ElfError, zipfile.BadZipFile, struct.error) as e:
            print(f"{path}: cannot read: {e}", file=sys.stderr)
            return 2
        if problems:
            failed = True
            print(f"FAIL {path}: {description}")
            for p in problems:
                print(f"  - {p}")
        else:
            print(f"ok   {path}: {description}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
