//! A stream's part in a capture: its session and lane, leaving or abandoning a capture, the
//! capture-mode rule for a capturing stream (a forbidden call invalidates the capture), and the
//! waits between streams that fork a capture onto another stream or join it back.

use super::*;

impl StreamInner {
    /// The capture this stream takes part in, and its lane.
    pub(crate) fn capture_info(&self) -> Option<(Arc<Session>, usize)> {
        lock(&self.state)
            .capture
            .as_ref()
            .map(|c| (c.session.clone(), c.lane))
    }

    /// Leaves `session` (at its end).
    pub(super) fn leave_capture(&self, session: &Arc<Session>) {
        let mut state = lock(&self.state);
        if state
            .capture
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(&c.session, session))
        {
            state.capture = None;
            self.capturing.store(false, Ordering::Release);
        }
    }

    /// The last handle is gone: ends the capture this stream began, whatever its state
    /// (nothing can end it any more), so that it neither keeps forbidding other calls nor keeps
    /// the streams that joined it capturing; they leave it and run their later work again. A
    /// stream that only joined a capture leaves it to its origin.
    pub(super) fn abandon_capture(&self) {
        let mut state = lock(&self.state);
        let Some(capture) = state.capture.take_if(|capture| capture.lane == 0) else {
            return;
        };
        self.capturing.store(false, Ordering::Release);
        drop(state);
        let session = capture.session;
        session.invalidate("the stream that began the capture was dropped");
        let (streams, ended) = session.finish();
        for stream in streams.iter().skip(1).filter_map(Weak::upgrade) {
            stream.leave_capture(&session);
        }
        // The captured nodes (user closures) are dropped here, under no lock.
        drop(ended);
    }

    /// The error for an operation that is illegal on a capturing stream; invalidates the capture.
    pub(super) fn capture_violation(&self, op: &'static str) -> Error {
        if let Some((session, _)) = self.capture_info() {
            session.invalidate(format!("{op} was called on a capturing stream"));
        }
        Error::capture(
            op,
            "not permitted on a capturing stream; the capture is invalidated",
        )
    }

    /// Adds "wait until `target` completed `seq`" (nothing if it already has).
    pub(super) fn wait_seq(
        self: &Arc<Self>,
        target: &Arc<StreamInner>,
        seq: u64,
        op: &'static str,
    ) -> Result<()> {
        if self.capturing.load(Ordering::Acquire) {
            if let Some((session, _)) = self.capture_info() {
                session.invalidate(format!("{op} waited for work outside the capture"));
                return Err(Error::capture(
                    op,
                    "waiting for work recorded outside the capture is not permitted \
                     (cudaErrorStreamCaptureIsolation); the capture is invalidated",
                ));
            }
        }
        if Arc::ptr_eq(target, self) || target.completed.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        // "completed ≥ seq" only grows: a wait for `seq` is implied by an earlier wait of this
        // stream for a count ≥ `seq` of the same stream (stream ids are never reused).
        let mark = Mark {
            stream: target.id,
            pos: seq,
        };
        let guard = self.tracker.lock();
        if guard.as_ref().is_some_and(|g| g.implied(self.id, mark)) {
            return Ok(());
        }
        self.queue(op, |pusher| pusher.wait_for(target, seq))?;
        if let Some(mut guard) = guard {
            guard.note(mark);
        }
        Ok(())
    }

    /// Waits for graph nodes of `session`: joins them into this stream's capture, or forks
    /// this stream into the capture.
    pub(super) fn join(
        self: &Arc<Self>,
        session: Arc<Session>,
        frontier: Frontier,
        op: &'static str,
    ) -> Result<()> {
        let mut state = lock(&self.state);
        match &state.capture {
            Some(capture) if Arc::ptr_eq(&capture.session, &session) => {
                let lane = capture.lane;
                drop(state);
                session.merge(lane, &frontier, op)
            }
            Some(capture) => {
                let mine = capture.session.clone();
                drop(state);
                mine.invalidate(format!("{op} tried to merge two separate captures"));
                Err(Error::capture(
                    op,
                    "the event belongs to another capture (cudaErrorStreamCaptureMerge); the \
                     capture is invalidated",
                ))
            }
            None => {
                if !session.is_active() {
                    // The capture has ended: the record stands for nothing that will run.
                    return Ok(());
                }
                if self.kind == StreamKind::Legacy {
                    return Err(Error::capture(
                        op,
                        "the legacy default stream cannot take part in a capture",
                    ));
                }
                let lane = session.add_lane(self, frontier, op)?;
                state.capture = Some(StreamCapture { session, lane });
                self.capturing.store(true, Ordering::Release);
                Ok(())
            }
        }
    }
}
