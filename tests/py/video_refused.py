"""Video is refused clearly: alice's publish of a video track fails (outpost-room
answers its AddTrackRequest with UNSUPPORTED_TYPE and never confirms it), bob never
sees a video publication, and alice can still publish audio that bob hears."""

import asyncio
import time

from livekit import rtc

from audio_tone import Tone, analyse, join, publish, record
from lkcommon import check, report, run, wait_for


async def main():
    bob = await join("bob", auto_subscribe=True)
    published = []
    subscribed = []
    bob.on("track_published", lambda pub, p: published.append(pub.kind))
    bob.on("track_subscribed", lambda t, pub, p: subscribed.append(t))

    alice = await join("alice", auto_subscribe=False)
    source = rtc.VideoSource(64, 64)
    video = rtc.LocalVideoTrack.create_video_track("camera", source)
    started = time.monotonic()
    error = None
    try:
        await alice.local_participant.publish_track(
            video, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_CAMERA))
    except Exception as e:  # the SDK's PublishTrackError
        error = str(e)
    refused_after = time.monotonic() - started
    check(error is not None, "publishing video succeeded")

    # Audio still works for the same participant.
    src, _track, _pub = await publish(alice)
    tone = Tone(src)
    await wait_for(lambda: subscribed, 15, "bob to subscribe to alice's audio")
    samples, arrivals = await record(subscribed[0], 2.0)
    res = analyse(samples, arrivals)
    check(abs(res["freq_hz"] - 440) <= 8.8, f"heard {res}")
    check(rtc.TrackKind.KIND_VIDEO not in published, f"bob saw a video publication: {published}")
    await tone.stop()
    report(scenario="video_refused", ok=True, error=error,
           refused_after_s=round(refused_after, 1), audio_freq_hz=res["freq_hz"])
    await alice.disconnect()
    await bob.disconnect()


if __name__ == "__main__":
    run(main)
