"""Speech for the audio interop tests: a reference utterance from espeak-ng, and how
closely a received recording matches it.

- `make_reference(path)`: espeak-ng speaks SENTENCE (its native 22.05 kHz), resampled
  to 48 kHz band-limited (FFT zero-padding), written as a mono 16-bit WAV.
- `compare(ref, rec)`: the normalised cross-correlation (NCC) of the recording with the
  reference at the best lag: max over lags of <ref, rec[lag:lag+len]> / (|ref| |rec
  window|). 1.0 is the same waveform; a gap, a stretch, garbling or the wrong audio
  pulls it down. Also the NCC of each voiced 100 ms segment tracked along the
  recording (`tracked_segments`: tolerant of a receiver's time-stretching), and the
  level ratio.

Run as `python speech.py reference OUT.wav` or `python speech.py compare REF.wav REC.raw`
(REC: raw 48 kHz mono s16le) to print the comparison as JSON.
"""

import json
import subprocess
import sys
import tempfile
import wave

import numpy as np

RATE = 48000
# How far a 100 ms segment may move against the one before it (tracked_segments).
DRIFT_MS = 25
SENTENCE = "Outpost is listening. The quick brown fox jumps over the lazy dog."


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise ValueError(f"{path}: expected mono 16-bit")
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64)
    return rate, x


def write_wav(path, x, rate=RATE):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.clip(np.round(x), -32768, 32767).astype("<i2").tobytes())


def resample(x, src, dst):
    """Band-limited resampling of a whole signal by FFT zero-padding."""
    n_out = int(round(len(x) * dst / src))
    spec = np.fft.rfft(x)
    out = np.zeros(n_out // 2 + 1, dtype=complex)
    k = min(len(spec), len(out))
    out[:k] = spec[:k]
    return np.fft.irfft(out, n_out) * (n_out / len(x))


def make_reference(path):
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        subprocess.run(["espeak-ng", "-s", "150", "-w", f.name, SENTENCE], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rate, x = read_wav(f.name)
    y = resample(x, rate, RATE)
    # Normalise to a speaking level well clear of clipping (peak at half scale).
    y *= 0.5 * 32767 / max(1.0, np.abs(y).max())
    write_wav(path, y)
    return y


def xcorr(a, b):
    """Full cross-correlation c[k] = sum a[n] b[n + k - (len(a) - 1)] by FFT."""
    n = len(a) + len(b) - 1
    size = 1 << (n - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a[::-1], size) * np.fft.rfft(b, size), size)[:n]


def compare(ref, rec):
    ref = np.asarray(ref, dtype=np.float64)
    rec = np.asarray(rec, dtype=np.float64)
    if len(rec) < len(ref):
        rec = np.concatenate([rec, np.zeros(len(ref) - len(rec))])
    # c[j] = <ref, rec[j - len(ref) + 1 :][:len(ref)]>; only full overlaps count.
    c = xcorr(ref, rec)[len(ref) - 1:len(rec)]
    energy = np.concatenate([[0.0], np.cumsum(rec * rec)])
    win = energy[len(ref):] - energy[:len(rec) - len(ref) + 1]
    ncc = c / (np.sqrt(np.sum(ref * ref)) * np.sqrt(np.maximum(win, 1e-9)))
    lag = int(np.argmax(ncc))
    seg = rec[lag:lag + len(ref)]
    local = tracked_segments(ref, rec)
    return {
        "ncc": round(float(ncc[lag]), 4),
        "lag_ms": round(lag * 1000 / RATE, 1),
        "segments": len(local),
        "segment_ncc_mean": round(float(local.mean()), 4),
        "segment_ncc_median": round(float(np.median(local)), 4),
        "segment_ncc_worst": round(float(local.min()), 4),
        "level_ratio": round(float(np.sqrt(np.sum(seg * seg) / np.sum(ref * ref))), 3),
    }


def best_ncc(r, s):
    """Best NCC of `r` against every full-overlap window of `s`, and its offset."""
    if len(s) < len(r):
        return 0.0, 0
    c = xcorr(r, s)[len(r) - 1:len(s)]
    e = np.concatenate([[0.0], np.cumsum(s * s)])
    w = e[len(r):] - e[:len(s) - len(r) + 1]
    v = c / (np.sqrt(np.sum(r * r)) * np.sqrt(np.maximum(w, 1e-9)))
    k = int(np.argmax(v))
    return float(v[k]), k


def tracked_segments(ref, rec):
    """NCC of each voiced 100 ms segment of the reference at its own best offset in the
    recording, each searched within +-DRIFT_MS of the previous segment's (the first in
    the whole recording). A receiver that time-stretches to steer its delay (libwebrtc's
    NetEq accelerates and expands by whole pitch periods) makes the offset drift along
    the utterance, which a single global lag counts as a mismatch though the speech is
    intact; a gap, garbling or the wrong audio still scores low here."""
    step = RATE // 10
    reach = RATE * DRIFT_MS // 1000
    level = np.sqrt(np.sum(ref * ref) / len(ref) * step)
    out = []
    offset = None
    for i in range(0, len(ref) - step + 1, step):
        r = ref[i:i + step]
        if np.sqrt(np.sum(r * r)) < 0.2 * level:
            continue  # a pause in the speech
        if offset is None:
            v, k = best_ncc(r, rec)
            offset = k - i
        else:
            lo = max(0, i + offset - reach)
            v, k = best_ncc(r, rec[lo:i + offset + step + reach])
            offset = lo + k - i
        out.append(v)
    return np.array(out) if out else np.zeros(1)


if __name__ == "__main__":
    if sys.argv[1] == "reference":
        y = make_reference(sys.argv[2])
        print(json.dumps({"samples": len(y), "seconds": round(len(y) / RATE, 3)}))
    elif sys.argv[1] == "compare":
        _, ref = read_wav(sys.argv[2])
        rec = np.fromfile(sys.argv[3], dtype="<i2").astype(np.float64)
        print(json.dumps(compare(ref, rec)))
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")
