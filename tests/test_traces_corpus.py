"""Every stack trace in the real crash corpora is detected whole, header to last frame.

Corpora (not copied into the project; skipped when absent):
- ``../shared/corpus/crash-traces/``: 93 ClusterFuzz stack-analyzer fixtures;
- ``../shared/corpus/exception-traces/``: 13 traces of fluent-plugin-detect-exceptions.

EXPECT below is the per-file expectation, written by reading each file (not by running the
rules): the 1-based, inclusive line ranges that form a trace — from its header (the crash or
exception line, with the '=====' / 'DEADLYSIGNAL' / '#' banner that opens it) to its last frame
or its 'SUMMARY:' line. Every non-blank line in a range must be covered by a trace-family span.
A string instead of ranges says why a file holds no stack trace. EXCEPT lists lines inside a range
that belong to other processes (logcat interleaving) and so are not part of the trace.
Shadow-byte dumps after a sanitizer's SUMMARY line, fuzzer banners, reproducer dumps and
environment lines are outside the ranges on purpose: they are not the trace.
"""

from __future__ import annotations

import pytest

from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.normalize import normalize_line

from conftest import CORPUS

_JAVA_FATAL = [
    (8, 26), (48, 66), (68, 80), (109, 127), (149, 167), (169, 181), (207, 225), (247, 265), (267, 279),
    (308, 326), (348, 366), (368, 380), (406, 424), (446, 464), (466, 478), (504, 522),
    (625, 633), (634, 646), (647, 659), (660, 672), (675, 687), (688, 700), (701, 713),
    (722, 731), (732, 741), (742, 751), (752, 761), (762, 771), (772, 781), (782, 791), (792, 801), (802, 807),
    (893, 903), (908, 916),
]

EXPECT: dict[str, list[tuple[int, int]] | str] = {
    # ---------------------------------------------------------------- exception-traces (whole files)
    "exception-traces/CSHARP_EXC.txt": [(1, 11)],  # Mono: header + '  at ... [0x..] in file:N'
    "exception-traces/DART_ARGUMENT_ERR.txt": [(1, 7)],
    "exception-traces/DART_CONCURRENT_MODIFICATION_ERR.txt": [(1, 7)],
    "exception-traces/DART_EXC.txt": [(1, 7)],
    "exception-traces/DART_FORMAT_WITH_CODE_ERR.txt": [(1, 10)],  # message, code line, caret, blank, frames
    "exception-traces/DART_OOM_ERR.txt": [(1, 7)],
    "exception-traces/DART_STACK_OVERFLOW_ERR.txt": [(1, 7)],
    "exception-traces/DART_UNSUPPORTED_ERR.txt": [(1, 7)],
    "exception-traces/GO_HTTP.txt": [(1, 18)],  # 'http: panic serving' behind a log timestamp
    "exception-traces/JAVA_EXC.txt": [(1, 6)],  # header behind a java.util.logging prefix
    "exception-traces/NODE_JS_EXC.txt": [(1, 11)],
    "exception-traces/PHP_ON_GAE_EXC.txt": [(1, 8)],
    "exception-traces/RUBY_EXC.txt": [(1, 11)],  # Rails 'Type (msg):' + 'app/...rb:N:in' lines
    # ---------------------------------------------------------------- crash-traces
    "crash-traces/android_asan_null_dereference_write.txt": [(1, 32)],  # report + 2 thread-creation stacks
    "crash-traces/android_asan_unknown_write.txt": [(1, 13)],  # line 14: dangling 'Thread T8 created' (file cut)
    "crash-traces/android_kernel_kasan_510.txt": [(1, 609)],  # KASAN report, panic, per-CPU stop dumps
    "crash-traces/asan_assert_failure.txt": [(2, 45)],  # Envoy 'assert failure:' line, then ASan ABRT
    "crash-traces/asan_bus.txt": [(12, 71)],
    "crash-traces/asan_fpe.txt": [(1, 44)],
    "crash-traces/asan_heap_overflow_write.txt": [(1, 57)],
    "crash-traces/asan_in_drt_string.txt": "layout-test text dump that only lists ASan symbol names (___asan_init ...) "
                                           "and a Chromium IPC error line: no crash report, no stack",
    "crash-traces/asan_null_dereference_unknown.txt": [(1, 79)],
    "crash-traces/asan_null_dereference_write.txt": [(1, 40)],
    "crash-traces/asan_stack_overflow3.txt": [(1, 28)],  # cut after frame #25, no SUMMARY
    "crash-traces/asan_unknown_crash_write.txt": [(1, 18)],
    "crash-traces/asan_unknown_win_read.txt": [(1, 43)],
    "crash-traces/assert.txt": [(6, 83)],  # WebKit ASSERTION FAILED + WTF backtrace, then ASan SEGV
    "crash-traces/assert_glibc.txt": [(1, 18)],  # glibc assert line (garbled quote), ASan ABRT, cut at #12
    "crash-traces/assert_with_panic_keyword.txt": [(12, 35), (38, 56)],  # symbolized + unsymbolized reports
    "crash-traces/browser_uaf.txt": [(2, 126)],
    "crash-traces/cdb_integer_overflow.txt": [(99, 100), (114, 116), (118, 122), (148, 187), (233, 272)],
    "crash-traces/cdb_read_x64.txt": [(95, 95), (448, 448), (588, 590), (592, 599), (638, 680), (702, 744)],
    "crash-traces/centipede_oom.txt": "Centipede reports only the failure kind ('rss-limit-exceeded'), no stack",
    "crash-traces/centipede_timeout.txt": "Centipede timeout report ('Timeout of 20 seconds exceeded'), no stack",
    "crash-traces/cfi_bad_cast_indirect_fc.txt": [(1, 12)],
    "crash-traces/cfi_unrelated_vtable.txt": [(1, 4)],  # runtime error, note, vtable bytes, caret
    "crash-traces/check_failure_android_media.txt": [(1, 45)],  # CHECK_EQ, tombstone, backtrace
    "crash-traces/check_failure_chrome.txt": [(6, 110)],
    "crash-traces/check_failure_chrome_mac.txt": [(2, 16)],
    "crash-traces/check_failure_vs_no_closing.txt": [(1, 120)],  # CHECK with a multi-line operand dump
    "crash-traces/check_failure_with_comparison2.txt": [(1, 1)],
    "crash-traces/check_failure_with_msan_abrt.txt": [(1, 40)],
    "crash-traces/check_log_message.txt": [(2, 55)],  # Windows 'sym [0x...+N] (file.cc:N)' frames
    "crash-traces/command_injection_bug.txt": [(4, 21)],  # from '===BUG DETECTED===' (lines 1-3: detector notes)
    "crash-traces/corrected_stacktrace.txt": [(20, 37)],  # deliberately garbled: non-hex addresses, wrapped frames
    "crash-traces/dcheck_failure_chrome.txt": [(6, 110)],
    "crash-traces/fuchsia_asan.txt": [(14, 40)],  # header wrapped over two lines
    "crash-traces/fuzzer_exit_tag_mismatch.txt": [(6, 19)],
    "crash-traces/gdb_sigtrap_and_libfuzzer.txt": [(3, 24)],  # gdb session, then libFuzzer deadly signal
    "crash-traces/golang_asan_panic.txt": [(1, 19)],
    "crash-traces/golang_generic_panic_and_asan_abrt.txt": [(1, 16)],
    "crash-traces/golang_not_ubsan.txt": [(2, 33)],  # line 1 is an application log line
    "crash-traces/golang_panic_runtime_error_index_out_of_range_with_msan.txt": [(1, 25)],
    "crash-traces/golang_panic_runtime_error_makeslice_len_out_of_range.txt": [(1, 19)],
    "crash-traces/golang_panic_with_type_assertions_in_frames.txt": [(5, 30)],
    "crash-traces/googletest.txt": [(1, 34)],
    "crash-traces/gpu_failure.txt": "Chromium browser log: the GPU process crash shows only as log lines "
                                    "('GPU process exited unexpectedly: exit_code=...'), no stack",
    "crash-traces/hwasan_tag_mismatch.txt": [(1, 18)],
    "crash-traces/ignore_honggfuzz.txt": [(1, 20)],
    "crash-traces/ignore_sanitizer.txt": [(1, 45)],  # report + 'Thread T4 created by T0 here:' stack
    "crash-traces/java_fatal_exception.txt": _JAVA_FATAL,  # every Java trace in the logcat, header to last 'at'
    "crash-traces/jazzer_js_typescript.txt": [(12, 16)],
    "crash-traces/kasan_gpf.txt": [(1, 47)],  # kasan: preamble lines, GPF oops, to '---[ end trace ]---'
    "crash-traces/keep_libc_if_unsymbolized.txt": [(85, 161)],  # Android tombstone
    "crash-traces/kernel_bug_invalid_opcode.txt": [(2, 32)],
    "crash-traces/libfuzzer_llvm_fuzzer_test_one_input_crash.txt": [(1, 17)],
    "crash-traces/libfuzzer_overwrites_const_input.txt": [(1, 11)],
    "crash-traces/libgcc_s.txt": [(4, 17)],  # V8 fatal banner glued to ASan DEADLYSIGNAL
    "crash-traces/lkl_libfuzzer_unsymbolized.txt": [(69, 112), (122, 131), (134, 141), (211, 254), (264, 273), (276, 283)],
    "crash-traces/lsan_indirect_leak_cycle.txt": [(1, 84)],
    "crash-traces/miracle_ptr_not_protected.txt": [(1, 16)],
    "crash-traces/missing_library_linux.txt": "a single dynamic-loader error line, no stack (kept by error.os-message)",
    "crash-traces/msan_renderer.txt": [(1, 74)],  # cut after the origin stack, no SUMMARY
    "crash-traces/notreached_log_message.txt": [(1, 52)],
    "crash-traces/oom2.txt": [(1, 21)],
    "crash-traces/oom4.txt": [(2, 18)],
    "crash-traces/python_exception_with_fuzz_target_exited.txt": [(10, 17), (27, 40)],  # Atheris + libFuzzer
    "crash-traces/rust_ignores.txt": [(7, 42)],  # pre-1.73 quoted panic over 3 lines, then libFuzzer
    "crash-traces/rust_panic_fuchsia_asan.txt": [(2, 43)],
    "crash-traces/sanitizer_oom.txt": [(1, 23)],
    "crash-traces/security_dcheck_failure_with_abrt.txt": [(1, 124)],
    "crash-traces/swift_invalid_free.txt": [(2, 108)],  # Swift assertion + 'Current stack trace:', then ASan
    "crash-traces/symbolized_asan_null_dereference.txt": [(3, 49)],
    "crash-traces/tsan_use_after_free.txt": [(1, 136), (138, 270), (275, 348), (350, 411)],
    "crash-traces/ubsan_bad_cast_downcast.txt": [(1, 33), (35, 67)],
    "crash-traces/ubsan_fpe.txt": [(1, 44)],
    "crash-traces/ubsan_incorrect_function_pointer_type.txt": [(1, 15)],
    "crash-traces/ubsan_integer_overflow_negation.txt": [(4, 53)],
    "crash-traces/ubsan_non_positive_vla_bound_value.txt": [(6, 17)],
    "crash-traces/ubsan_null_pointer_read.txt": [(6, 19)],
    "crash-traces/ubsan_object_size.txt": [(6, 17)],
    "crash-traces/ubsan_pointer_overflow_null_zero_offset.txt": [(2, 20)],
    "crash-traces/ubsan_upcast_of_null_pointer.txt": [(1, 24)],
    "crash-traces/unknown_crash_and_timeout.txt": [(8, 31), (34, 51)],  # libFuzzer timeout, then logcat tombstone
    "crash-traces/v8_abort_without_source.txt": [(1, 82)],  # CSA_ASSERT abort, JS stack trace, details, ASan
    "crash-traces/v8_check_no_sourcefile.txt": [(11, 49), (52, 63)],
    "crash-traces/v8_check_windows.txt": [(1, 4)],
    "crash-traces/v8_dcheck_symbolized.txt": [(1, 155)],  # C stack trace with wrapped frames, then ASan
    "crash-traces/v8_fatal_error_no_file.txt": [(7, 69)],
    "crash-traces/v8_isolate_pushstacktraceanddie.txt": [(5, 72)],
    "crash-traces/v8_oom.txt": [(1, 4)],
    "crash-traces/v8_representation_changer_error.txt": [(1, 4)],
    "crash-traces/v8_sandbox_violation_segv.txt": [(6, 31)],
    "crash-traces/v8_unknown_fatal_error.txt": [(1, 4)],
    "crash-traces/variable_length_write.txt": [(1, 6)],
    "crash-traces/windows_asan_divide_by_zero.txt": [(1, 119)],
}

# lines inside an expected range that another process wrote (logcat interleaving): not the trace
EXCEPT: dict[str, set[int]] = {
    "crash-traces/check_failure_android_media.txt": {3, 4, 17, 18, 19, 20, 21, 22, 26},
}


def _files() -> list[str]:
    out = []
    for sub in ("crash-traces", "exception-traces"):
        d = CORPUS / sub
        if d.is_dir():
            out.extend(f"{sub}/{p.name}" for p in sorted(d.glob("*.txt")))
    return out


FILES = _files()


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector(load_rules(), families={"trace"})


def test_every_corpus_file_has_an_expectation():
    if not FILES:
        pytest.skip(f"corpus not available: {CORPUS}")
    missing = [f for f in FILES if f not in EXPECT]
    stale = [f for f in EXPECT if f not in FILES]
    assert not missing, f"add an expectation for: {missing}"
    assert not stale, f"expectation for files that are gone: {stale}"


@pytest.mark.corpus
@pytest.mark.parametrize("name", FILES or ["(corpus absent)"])
def test_trace_detected_whole(name, detector):
    if name not in EXPECT:
        pytest.skip("no corpus")
    expect = EXPECT[name]
    path = CORPUS / name
    lines = [normalize_line(line) for line in path.read_text(encoding="utf-8").splitlines()]
    res = detector.detect("\n".join(lines), role="tool")
    assert not res.protect_all, f"a trace rule timed out on {name}: {res.diagnostics}"
    if isinstance(expect, str):
        # no stack trace in the file (the reason is in EXPECT): no trace rule claims one
        assert not res.hits, f"{name} holds no stack trace ({expect}), yet: {sorted({h[0] for h in res.hits})}"
        return
    covered = res.protected_lines(nlines=len(lines))  # 0-based
    skip = EXCEPT.get(name, set())
    missing = []
    for first, last in expect:
        assert 1 <= first <= last <= len(lines), f"bad range {first}-{last} for {name} ({len(lines)} lines)"
        for n in range(first, last + 1):
            if n in skip or not lines[n - 1].strip():
                continue
            if n - 1 not in covered:
                missing.append(n)
    assert not missing, (f"{name}: {len(missing)} trace line(s) not protected, e.g. "
                         + "; ".join(f"{n}: {lines[n - 1][:100]!r}" for n in missing[:6]))
