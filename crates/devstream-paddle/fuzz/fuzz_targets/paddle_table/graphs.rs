//! Capture and graph calls: begin and end a capture, capture info, instantiate, launch,
//! destroy, and the graph queries.

use crate::draw::{stream_arg, Draw};
use crate::model::{expect, expect_destroyed, Capture, GraphState, Kind, Model};
use crate::UNWRITTEN;
use devstream_paddle_sys::*;
use libfuzzer_sys::arbitrary::Result as Drawn;
use std::ffi::c_int;
use std::ptr::null_mut;

/// Ops 25..=33.
pub(crate) fn step(d: &mut Draw, m: &mut Model, op: u8, dev: C_Device, dev_ok: bool) -> Drawn<()> {
    match op {
        25 => {
            let s = stream_arg(d, m)?;
            let mode = match d.byte()? % 8 {
                7 => d.u.arbitrary::<c_int>()?,
                b => c_int::from(b % 3),
            };
            let free = m.capture_of(s).is_none();
            let valid = dev_ok && s != 0 && m.is_live(Kind::Stream, s) && (0..3).contains(&mode);
            let answer = call!(cuda_stream_begin_capture(dev, s as C_Stream, mode));
            let ok: &[C_Status] = if free { &[C_SUCCESS] } else { &[C_ERROR] };
            expect(m, "cuda_stream_begin_capture", answer, valid, ok);
            if answer == C_SUCCESS {
                let id = m.next_capture;
                m.next_capture += 1;
                m.captures.push(Capture {
                    id,
                    may_fail: false,
                });
                if let Some(st) = m.stream(s) {
                    st.origin = Some(id);
                    st.joined = None;
                }
            }
        }
        26 => {
            let s = stream_arg(d, m)?;
            let null_out = d.byte()? % 8 == 0;
            let mut graph = UNWRITTEN as C_CudaGraph;
            let out_ptr = if null_out { null_mut() } else { &mut graph };
            let origin = m
                .streams
                .iter()
                .find(|st| st.handle == s)
                .and_then(|st| st.origin);
            let valid = dev_ok && !null_out && m.is_live(Kind::Stream, s);
            let answer = call!(cuda_stream_end_captrue(dev, s as C_Stream, out_ptr));
            // Not capturing: refused. A capture's end may fail (an invalidated capture, a
            // stream that joined and was not joined back) and ends it all the same.
            let ok: &[C_Status] = if origin.is_some() {
                &[C_SUCCESS, C_ERROR]
            } else {
                &[C_ERROR]
            };
            expect(m, "cuda_stream_end_captrue", answer, valid, ok);
            let mut may_fail = false;
            if let (true, Some(id)) = (valid, origin) {
                may_fail = m.end_capture(id);
            }
            if answer == C_SUCCESS {
                assert!(!graph.is_null() && graph as usize != UNWRITTEN);
                m.graphs.push(GraphState {
                    handle: graph as usize,
                    may_fail,
                });
            } else if !null_out {
                assert_eq!(graph as usize, UNWRITTEN, "end_capture wrote on failure");
            }
        }
        27 => {
            let s = stream_arg(d, m)?;
            let null_status = d.byte()? % 8 == 0;
            let mut status: C_StreamCaptureStatus = -7;
            let mut id: std::ffi::c_ulonglong = 7;
            let status_ptr = if null_status { null_mut() } else { &mut status };
            let valid = dev_ok && !null_status && (s == 0 || m.is_live(Kind::Stream, s));
            let answer = call!(cuda_stream_capture_info(
                dev,
                s as C_Stream,
                status_ptr,
                &mut id,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ));
            expect(m, "cuda_stream_capture_info", answer, valid, &[C_SUCCESS]);
            if answer != C_SUCCESS {
                assert_eq!((status, id), (-7, 7), "capture_info wrote on failure");
            } else if m.capture_of(s).is_none() && !m.relaxed() {
                assert_eq!(status, C_StreamCaptureStatusNone, "no capture open");
            }
        }
        28 => {
            let g = d.value(m, Kind::Graph)?;
            let null_exec = d.byte()? % 8 == 0;
            let null_graph = d.byte()? % 8 == 0;
            let mut graph = g as C_CudaGraph;
            let mut exec = UNWRITTEN as C_GraphExec;
            let exec_ptr = if null_exec { null_mut() } else { &mut exec };
            let graph_ptr = if null_graph { null_mut() } else { &mut graph };
            let valid = !null_exec && !null_graph && m.is_live(Kind::Graph, g);
            let answer = call!(cuda_graph_instantiate(
                exec_ptr,
                graph_ptr,
                null_mut(),
                null_mut(),
                0
            ));
            expect(m, "cuda_graph_instantiate", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS {
                assert!(!exec.is_null() && exec as usize != UNWRITTEN);
                let may_fail = m.graphs.iter().any(|gr| gr.handle == g && gr.may_fail);
                m.execs.push(GraphState {
                    handle: exec as usize,
                    may_fail,
                });
            } else {
                assert_eq!(exec as usize, UNWRITTEN, "instantiate wrote on failure");
            }
        }
        29 => {
            let x = d.value(m, Kind::Exec)?;
            let s = stream_arg(d, m)?;
            let valid =
                dev_ok && m.is_live(Kind::Exec, x) && (s == 0 || m.is_live(Kind::Stream, s));
            let answer = call!(cuda_graph_launch(dev, x as C_GraphExec, s as C_Stream));
            expect(m, "cuda_graph_launch", answer, valid, &[C_SUCCESS]);
            if answer == C_SUCCESS && m.execs.iter().any(|g| g.handle == x && g.may_fail) {
                m.work_may_fail(s);
            }
        }
        30 => {
            let g = d.value(m, Kind::Graph)?;
            let valid = m.is_live(Kind::Graph, g);
            let answer = call!(cuda_graph_destroy(g as C_CudaGraph));
            expect_destroyed(m, "cuda_graph_destroy", (Kind::Graph, g), valid, answer);
        }
        31 => {
            let x = d.value(m, Kind::Exec)?;
            let valid = m.is_live(Kind::Exec, x);
            let answer = call!(cuda_graph_exec_destroy(x as C_GraphExec));
            expect_destroyed(m, "cuda_graph_exec_destroy", (Kind::Exec, x), valid, answer);
        }
        32 => {
            let g = d.value(m, Kind::Graph)?;
            let mut nodes_slot: C_CudaGraphNode = null_mut();
            let nodes = if d.byte()? % 4 == 0 {
                &mut nodes_slot as *mut C_CudaGraphNode
            } else {
                null_mut()
            };
            let null_count = d.byte()? % 8 == 0;
            let mut count = 77usize;
            let count_ptr = if null_count { null_mut() } else { &mut count };
            let valid = m.is_live(Kind::Graph, g) && nodes.is_null() && !null_count;
            let answer = call!(cuda_graph_get_nodes(g as C_CudaGraph, nodes, count_ptr));
            expect(m, "cuda_graph_get_nodes", answer, valid, &[C_SUCCESS]);
            if answer != C_SUCCESS {
                assert_eq!(count, 77, "get_nodes wrote on failure");
            }
        }
        33 => {
            let g = d.value(m, Kind::Graph)?;
            let null_hooks = d.byte()? % 8 == 0;
            let mut hooks = C_GraphHookManager {
                size: 77,
                hooks: null_mut(),
                user_data: null_mut(),
            };
            let hooks_ptr = if null_hooks { null_mut() } else { &mut hooks };
            let valid = m.is_live(Kind::Graph, g) && !null_hooks;
            let answer = call!(get_parameter_setter_for_exec_graph(
                g as C_CudaGraph,
                hooks_ptr
            ));
            expect(
                m,
                "get_parameter_setter_for_exec_graph",
                answer,
                valid,
                &[C_SUCCESS],
            );
            if answer != C_SUCCESS {
                assert_eq!(hooks.size, 77, "get_parameter_setter wrote on failure");
            }
        }
        _ => unreachable!("op {op} is no capture or graph call"),
    }
    Ok(())
}
