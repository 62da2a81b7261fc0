//! The IO around the [`Machine`]: the LiveKit room, the tool executor, the store and the
//! UI event channel. [`Core`] is the long-lived app object (store, policy, consent);
//! [`Core::connect`] starts a [`Session`] (one room connection) and returns its events.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use outpost_livekit::{
    AudioSourceOptions, DataOptions, LocalAudioTrack, Room, RoomEvent, RoomEvents, RoomOptions,
    RpcCallers, RpcError, StreamOptions, StreamReader, StreamSenders, TokenEndpoint, TokenRequest,
    TrackSubscribers,
};
use outpost_policy::{ConsentInbox, Decision};
use outpost_protocol::{MAX_MESSAGE_BYTES, Message, TOPIC, ToolUseResult};
use outpost_store::{Store, now_ms};
use tokio::sync::{mpsc, watch};

use crate::agents_io::{self, AgentsInput, Reply};
use crate::codec::{Frame, Inbound, InboundOrder, Ticket, frame};
use crate::error::{CoreError, Result};
use crate::events::UiEvent;
use crate::executor::{
    DispatchEvent, Executor, McpRoots, Permissions, ToolsConfig, consent_event, exec_event,
};
use crate::machine::{Command, Effect, Input, Machine, MachineConfig, Record, RpcFailure};
use crate::pace::CataloguePace;
use crate::voice::{LocalTracks, VoiceEvent};

/// How to get into the room.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// A server URL and an access token.
    Token {
        /// `ws(s)://` or `http(s)://` URL.
        url: String,
        /// The access token.
        token: String,
    },
    /// A token endpoint (LiveKit's token-server convention) that returns both.
    Endpoint {
        /// The endpoint.
        endpoint: Box<TokenEndpoint>,
        /// What to ask it for (room, identity, ...).
        request: Box<TokenRequest>,
    },
}

/// Options of one session.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// How to join.
    pub credentials: Credentials,
    /// The assistant's identity; `None` = the first participant of kind AGENT.
    pub assistant_identity: Option<String>,
    /// A conversation to continue (the first hello asks for it).
    pub conversation_id: Option<String>,
    /// The room's name, for the history.
    pub room_name: Option<String>,
    /// Forward consent questions as [`UiEvent::ConsentRequested`] (answer them with
    /// [`Core::answer_consent`]). Without a consent UI, every question is denied.
    pub consent_ui: bool,
    /// `clientName` / `clientVersion` of the hello.
    pub client_name: String,
    /// See `client_name`.
    pub client_version: String,
    /// Link settings.
    pub room_options: RoomOptions,
    /// Built-in tools switched off: not offered in the hello, and refused as unknown.
    pub disabled_tools: Vec<String>,
    /// The user's MCP servers: the tools their running servers offer join the catalogue
    /// (named `mcp__<server>__<tool>`), under the same policy and consent, and follow
    /// their servers' tool lists while the session lasts.
    pub mcp: Option<outpost_mcp::McpHost>,
    /// Voice: subscribe to the assistant's audio (handed out as
    /// [`VoiceEvent::AssistantAudio`]) and allow [`Session::publish_microphone`]. Off by
    /// default: a text-only session decodes no audio.
    pub voice: bool,
}

impl ConnectOptions {
    /// Options with defaults: no consent UI, new conversation.
    pub fn new(credentials: Credentials) -> Self {
        Self {
            credentials,
            assistant_identity: None,
            conversation_id: None,
            room_name: None,
            consent_ui: false,
            client_name: "Outpost".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            room_options: RoomOptions::default(),
            disabled_tools: Vec::new(),
            mcp: None,
            voice: false,
        }
    }
}

/// The app's core: the conversation store and the permission policy, shared by sessions.
#[derive(Debug, Clone)]
pub struct Core {
    store: Store,
    perms: Permissions,
}

/// UI events of one session, in order. The channel closes when the session has ended.
pub type SessionEvents = mpsc::UnboundedReceiver<UiEvent>;

impl Core {
    /// Opens the store in `data_dir` (flag, else `$OUTPOST_DATA_DIR`, else the platform's
    /// data directory) and the policy.
    pub fn open(data_dir: Option<PathBuf>, tools: ToolsConfig) -> Result<Self> {
        let store = Store::open_default(data_dir.as_deref())?;
        Self::with_store(store, tools)
    }

    /// A core over an already open store.
    pub fn with_store(store: Store, mut tools: ToolsConfig) -> Result<Self> {
        let data_dir = store.path().and_then(|p| p.parent()).map(PathBuf::from);
        if let Some(dir) = &data_dir {
            tools.protected.push(dir.clone());
        }
        // The record of confirmed settings lives beside the history.
        let perms = Permissions::with_trust(&tools, data_dir.as_deref())?;
        Ok(Self { store, perms })
    }

    /// The history (conversations, search, export, audit).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The built-in tools' descriptors (name, schema, hints), in catalogue order.
    pub fn builtin_tools(&self) -> Result<Vec<outpost_protocol::ToolDescriptor>> {
        crate::executor::builtin_tools()
    }

    /// The policy as the MCP sandbox's gate: what a server's own `read`/`write` folders
    /// and its program folders may be (`outpost_mcp::FolderGate`).
    pub fn mcp_gate(&self) -> std::sync::Arc<dyn outpost_mcp::FolderGate> {
        self.perms.mcp_gate()
    }

    /// The policy and consent broker.
    pub fn permissions(&self) -> &Permissions {
        &self.perms
    }

    /// The policy's allowed folders as MCP roots, split around everything the policy
    /// denies ([`Permissions::mcp_roots`]), and what was left out. The folders are walked
    /// on the blocking pool. Call inside a tokio runtime.
    pub async fn mcp_roots(&self) -> McpRoots {
        let perms = self.perms.clone();
        tokio::task::spawn_blocking(move || perms.mcp_roots())
            .await
            .unwrap_or_default()
    }

    /// Offers [`Self::mcp_roots`] to `host`'s servers again after every change of the policy
    /// (an edit of the policy file, the settings pane); the host sends
    /// `notifications/roots/list_changed` when the list differs, and what was left out is
    /// logged. The same folders are what sandboxed servers may reach: when they change,
    /// the host restarts those that use them (`McpHost::set_folders`). Runs until aborted
    /// or the policy is gone. Call inside a tokio runtime.
    pub fn follow_mcp_roots(&self, host: outpost_mcp::McpHost) -> tokio::task::JoinHandle<()> {
        let core = self.clone();
        let mut status = self.perms.policy().status();
        tokio::spawn(async move {
            while status.changed().await.is_ok() {
                let roots = core.mcp_roots().await;
                if roots.roots != host.roots() {
                    for why in &roots.left_out {
                        tracing::info!("not offered to MCP servers as a root: {why}");
                    }
                    host.set_roots(roots.roots);
                }
                // The sandboxed servers that use the allowed folders restart with them.
                host.set_folders(roots.folders);
            }
        })
    }

    /// Answers a consent question (see [`UiEvent::ConsentRequested`]).
    pub fn answer_consent(&self, consent_id: &str, decision: Decision) -> Result<()> {
        self.perms.answer_consent(consent_id, decision)
    }

    /// Joins the room and starts a session. Returns once joined; the hello goes out as
    /// soon as the assistant is present. Must be called inside a tokio runtime.
    pub async fn connect(&self, opts: ConnectOptions) -> Result<(Session, SessionEvents)> {
        let mut room_opts = opts.room_options.clone();
        if let Some(a) = &opts.assistant_identity {
            room_opts.assistant_identity = Some(a.clone());
        }
        // Only the assistant's messages matter; another participant's streams are
        // dropped at their header so they can hold no slot the assistant needs.
        room_opts.stream_senders = StreamSenders::Assistant;
        // The same for RPC: anyone else's call is refused at its request packet or
        // stream header, before its payload costs anything (the machine records it).
        room_opts.rpc_callers = RpcCallers::Assistant;
        let refusal = RpcFailure::not_the_assistant();
        room_opts.rpc_refusal = RpcError::new(refusal.code, refusal.message, refusal.data);
        room_opts.auto_subscribe = room_opts.auto_subscribe || opts.voice;
        // The microphone is for the assistant's ears only.
        room_opts.track_subscribers = TrackSubscribers::Assistant;
        let (executor, dispatch_rx) =
            Executor::new(&self.perms, &opts.disabled_tools, opts.mcp.clone())?;
        // LiveKit Agents mode: Outpost's RPC methods are answered from the moment the
        // room is joined, so an agent that calls at once, before Outpost knows what it
        // speaks, is answered (docs/AGENTS.md); its calls wait in `agents_rx` until
        // the session's loop runs.
        let (agents_tx, agents_rx) = mpsc::unbounded_channel();
        room_opts.rpc_methods = outpost_livekit::RpcMethods::new();
        let registered: Vec<String> = executor.catalogue().into_iter().map(|t| t.name).collect();
        agents_io::register_methods(
            &room_opts.rpc_methods,
            registered.iter().cloned(),
            &agents_tx,
        );
        let (room, room_events) = match &opts.credentials {
            Credentials::Token { url, token } => Room::connect(url, token, room_opts).await?,
            Credentials::Endpoint { endpoint, request } => {
                Room::connect_with_endpoint(endpoint, request, room_opts).await?
            }
        };
        let mut mc = MachineConfig::new(executor.catalogue());
        mc.claims = executor.mcp_claims();
        mc.client_name = opts.client_name.clone();
        mc.client_version = opts.client_version.clone();
        mc.conversation_id = opts.conversation_id.clone();
        mc.room = opts.room_name.clone();
        let machine = Machine::new(mc);
        let (ui_tx, ui_rx) = mpsc::unbounded_channel();
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let (conv_tx, conv_rx) = watch::channel(None);
        let consent = opts.consent_ui.then(|| self.perms.attach_consent());
        let (send_tx, send_rx) = mpsc::unbounded_channel();
        let catalogues_queued = Arc::new(AtomicUsize::new(0));
        let sender = tokio::spawn(sender_task(
            room.clone(),
            send_rx,
            ui_tx.clone(),
            Arc::clone(&catalogues_queued),
        ));
        let (text_tx, text_rx) = mpsc::unbounded_channel();
        tokio::spawn(agents_io::text_sender(room.clone(), text_rx, ui_tx.clone()));
        let assistant = room.assistant().map(|p| p.identity);
        let room_assistant_sid = room.assistant().map(|p| p.sid);
        let local_tracks = LocalTracks::default();
        let session_room = room.clone();
        let (voice_tx, voice_rx) = mpsc::unbounded_channel();
        let io = Io {
            machine,
            room,
            executor,
            store: self.store.clone(),
            ui: ui_tx,
            send: send_tx,
            order: InboundOrder::default(),
            begun: HashSet::new(),
            conv: conv_tx,
            assistant_sid: room_assistant_sid,
            sid_at_loss: None,
            agents_tx,
            agents_rx: Some(agents_rx),
            text: text_tx,
            replies: std::collections::HashMap::new(),
            registered,
            local_tracks: local_tracks.clone(),
            voice: opts.voice.then_some(voice_tx),
            catalogues_queued,
        };

        let task =
            tokio::spawn(io.run(assistant, room_events, dispatch_rx, cmd_rx, consent, sender));
        Ok((
            Session {
                cmd: cmd_tx,
                conversation: conv_rx,
                task: tokio::sync::Mutex::new(Some(task)),
                room: session_room,
                voice: opts.voice,
                local_tracks,
                voice_events: std::sync::Mutex::new(Some(voice_rx)),
            },
            ui_rx,
        ))
    }
}

/// One live connection to an assistant. Dropping it leaves the room.
#[derive(Debug)]
pub struct Session {
    cmd: mpsc::UnboundedSender<Command>,
    conversation: watch::Receiver<Option<String>>,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    room: Room,
    voice: bool,
    local_tracks: LocalTracks,
    voice_events: std::sync::Mutex<Option<mpsc::UnboundedReceiver<VoiceEvent>>>,
}

impl Session {
    /// Publishes a mono microphone track (feed it 48 kHz PCM; mute it for push-to-talk),
    /// muted from the start when `muted`. Only in a session opened with
    /// [`ConnectOptions::voice`].
    pub async fn publish_microphone(&self, muted: bool) -> Result<LocalAudioTrack> {
        if !self.voice {
            return Err(CoreError::Voice(
                "this session was opened without voice".into(),
            ));
        }
        let track = self
            .room
            .publish_audio(AudioSourceOptions {
                name: "microphone".into(),
                channels: 1,
                muted,
            })
            .await
            .map_err(|e| CoreError::Voice(format!("the microphone track was refused: {e}")))?;
        let published = track.clone();
        self.local_tracks
            .insert(track.sid(), move || published.is_published());
        Ok(track)
    }

    /// The voice events (the assistant's audio, lost tracks), once: later calls get
    /// `None`. Without [`ConnectOptions::voice`] the channel stays empty.
    pub fn take_voice_events(&self) -> Option<mpsc::UnboundedReceiver<VoiceEvent>> {
        outpost_sync::lock(&self.voice_events).take()
    }

    fn command(&self, c: Command) -> Result<()> {
        self.cmd.send(c).map_err(|_| CoreError::Ended)
    }

    /// Sends a user message (held until the assistant has welcomed us). Returns its id.
    pub fn send_message(&self, text: impl Into<String>) -> Result<String> {
        self.send_message_with(text, Vec::new())
    }

    /// Sends a user message with files (`(name, mime type, bytes)` each), which go first:
    /// Attachment messages (Outpost protocol, to an assistant that announced
    /// `attachments`) or byte streams (LiveKit Agents mode: images on `images`, other
    /// files on `files`). Returns the message id. An assistant that takes no files gets
    /// nothing; the UI is told.
    pub fn send_message_with(
        &self,
        text: impl Into<String>,
        files: Vec<(String, String, Vec<u8>)>,
    ) -> Result<String> {
        let id = outpost_protocol::new_id();
        let attachments = files
            .into_iter()
            .map(|(name, mime, bytes)| {
                outpost_protocol::Attachment::new(
                    outpost_protocol::new_id(),
                    id.clone(),
                    name,
                    mime,
                    &bytes,
                )
            })
            .collect();
        self.command(Command::SendUserMessage {
            id: id.clone(),
            text: text.into(),
            attachments,
        })?;
        Ok(id)
    }

    /// Stops a tool call running on this computer; the assistant gets
    /// `permission_denied` ("the user stopped this call").
    pub fn cancel_tool(&self, id: impl Into<String>) -> Result<()> {
        self.command(Command::CancelTool { id: id.into() })
    }

    /// Starts a new conversation (`None`) or continues `Some(id)`: sends a new hello.
    pub fn switch_conversation(&self, conversation_id: Option<String>) -> Result<()> {
        self.command(Command::SwitchConversation {
            conversation_id,
            history: Vec::new(),
        })
    }

    /// Continues the stored conversation `conversation_id`, whose messages so far are
    /// `history` (oldest first): the Outpost protocol's hello carries them for an
    /// assistant that no longer holds the conversation; in LiveKit Agents mode the
    /// conversation opens at once and the agent may read them with `outpost.conversation`.
    pub fn continue_conversation(
        &self,
        conversation_id: String,
        history: Vec<outpost_protocol::HistoryMessage>,
    ) -> Result<()> {
        self.command(Command::SwitchConversation {
            conversation_id: Some(conversation_id),
            history,
        })
    }

    /// The live conversation, once welcomed.
    pub fn conversation_id(&self) -> Option<String> {
        self.conversation.borrow().clone()
    }

    /// Leaves the room after the messages already queued went out; waits until done.
    pub async fn leave(&self) -> Result<()> {
        let _ = self.command(Command::Leave);
        self.closed().await;
        Ok(())
    }

    /// Waits until the session has ended (left, refused, or the link gave up).
    pub async fn closed(&self) {
        let task = self.task.lock().await.take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }
}

struct Io {
    machine: Machine,
    room: Room,
    executor: Executor,
    store: Store,
    ui: mpsc::UnboundedSender<UiEvent>,
    send: mpsc::UnboundedSender<(String, Message)>,
    order: InboundOrder,
    begun: HashSet<String>,
    conv: watch::Sender<Option<String>>,
    /// The assistant's session id now, and when the link was lost.
    assistant_sid: Option<String>,
    sid_at_loss: Option<Option<String>>,
    /// LiveKit Agents mode: room traffic for the machine, user text to send, and the
    /// RPC calls waiting for the machine's answer.
    agents_tx: mpsc::UnboundedSender<AgentsInput>,
    agents_rx: Option<mpsc::UnboundedReceiver<AgentsInput>>,
    text: mpsc::UnboundedSender<agents_io::Outgoing>,
    replies: std::collections::HashMap<String, Reply>,
    /// The tool RPC methods registered now (Agents mode), followed as the catalogue changes.
    registered: Vec<String>,
    /// Our published tracks (transcriptions of them are the user's speech).
    local_tracks: LocalTracks,
    /// Where the assistant's audio goes, in a voice session.
    voice: Option<mpsc::UnboundedSender<VoiceEvent>>,
    /// ToolsChanged messages handed to the sender and not sent yet.
    catalogues_queued: Arc<AtomicUsize>,
}

/// The next change of the MCP servers' state, or never without a host.
async fn mcp_changed(rx: &mut Option<watch::Receiver<outpost_mcp::HostSnapshot>>) {
    match rx {
        Some(r) => {
            if r.changed().await.is_err() {
                // The host is gone: no more changes.
                *rx = None;
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

async fn next_consent(inbox: &mut Option<ConsentInbox>) -> Option<outpost_policy::ConsentEvent> {
    match inbox {
        Some(i) => i.next().await,
        None => std::future::pending().await,
    }
}

impl Io {
    /// Tells the UI which network path the link took.
    fn network_path(&self) {
        let path = self.room.connection_path();
        let _ = self.ui.send(UiEvent::NetworkPath {
            path: path.describe(),
            relayed: path.is_relayed(),
        });
    }

    async fn run(
        mut self,
        assistant: Option<String>,
        mut room_events: RoomEvents,
        mut dispatch: mpsc::UnboundedReceiver<DispatchEvent>,
        mut cmds: mpsc::UnboundedReceiver<Command>,
        mut consent: Option<ConsentInbox>,
        sender: tokio::task::JoinHandle<()>,
    ) {
        let Some(mut agents_rx) = self.agents_rx.take() else {
            return;
        };
        let (stream_tx, mut stream_rx) = mpsc::unbounded_channel::<(Ticket, Inbound)>();
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut leave = self.apply(Input::Joined { assistant }).await;
        self.network_path();
        if let Some(state) = self
            .room
            .assistant()
            .as_ref()
            .and_then(agents_io::agent_state)
        {
            leave = leave || self.apply(state).await;
        }
        let mut cmds_open = true;
        let mut pace = CataloguePace::new();
        let mut mcp_state = self
            .executor
            .mcp_host()
            .map(outpost_mcp::McpHost::subscribe);
        if let Some(rx) = &mut mcp_state {
            rx.borrow_and_update();
            // A server that finished starting between the catalogue and now.
            if self.executor.refresh_mcp() {
                leave = leave || self.tools_changed().await;
            }
        }
        while !leave {
            let input = tokio::select! {
                // Room events first: the engine tells of a participant before it hands on
                // the calls that participant made meanwhile (livekit-server relays a new
                // agent's first RPC before its news), so a caller's "is it the assistant?"
                // is judged after the room said who the assistant is.
                biased;
                ev = room_events.recv() => match ev {
                    Some(ev) => match self.room_event(ev, &stream_tx) {
                        Some(i) => i,
                        None => { leave = self.drain_inbound().await; continue; }
                    },
                    None => Input::Disconnected { reason: "the room closed".into() },
                },
                Some(a) = agents_rx.recv() => match a {
                    AgentsInput::Input(i) => i,
                    AgentsInput::Rpc(call, reply) => {
                        if self.replies.contains_key(&call.request_id) {
                            // A request id still being answered: the first caller keeps
                            // its reply channel; the repeat is told, never run twice.
                            let _ = reply.send(Err(RpcFailure {
                                code: crate::machine::RPC_APPLICATION_ERROR,
                                message: format!(
                                    "request {} is already being answered",
                                    call.request_id
                                ),
                                data: None,
                            }));
                            continue;
                        }
                        self.replies.insert(call.request_id.clone(), reply);
                        Input::Rpc(call)
                    }
                },
                Some((ticket, item)) = stream_rx.recv() => {
                    self.order.complete(ticket, item);
                    leave = self.drain_inbound().await;
                    continue;
                }
                Some(ev) = dispatch.recv() => match exec_event(ev) {
                    Some(e) => Input::Exec(e),
                    None => continue,
                },
                c = cmds.recv(), if cmds_open => match c {
                    Some(c) => Input::Command(c),
                    // Every Session handle is gone: leave.
                    None => { cmds_open = false; Input::Command(Command::Leave) }
                },
                Some(ev) = next_consent(&mut consent) => {
                    let _ = self.ui.send(consent_event(ev));
                    continue;
                }
                () = mcp_changed(&mut mcp_state) => {
                    // Taken when due (crate::pace): a flood of changes is one catalogue
                    // at a time.
                    pace.changed(tokio::time::Instant::now());
                    continue;
                }
                () = tokio::time::sleep_until(pace.due().unwrap_or_else(tokio::time::Instant::now)), if pace.due().is_some() => {
                    let queued = self.catalogues_queued.load(Ordering::Acquire) > 0;
                    if pace.fire(tokio::time::Instant::now(), queued) && self.executor.refresh_mcp() {
                        leave = self.tools_changed().await;
                    }
                    continue;
                }
                _ = tick.tick() => Input::Tick,
            };
            leave = self.apply(input).await;
        }
        // Let queued messages go out, then leave the room and make the log durable.
        drop(self.send);
        let _ = sender.await;
        let _ = self.room.leave().await;
        if let Err(e) = self.store.flush().await {
            let _ = self.ui.send(UiEvent::Error {
                message: format!("the conversation log could not be saved: {e}"),
            });
        }
    }

    /// The executor's catalogue changed: re-register the tool RPC methods and tell the
    /// machine. True = leave.
    async fn tools_changed(&mut self) -> bool {
        let tools = self.executor.catalogue();
        let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let methods = self.room.rpc_methods();
        for gone in self.registered.iter().filter(|n| !names.contains(n)) {
            methods.unregister(gone);
        }
        let new: Vec<String> = names
            .iter()
            .filter(|n| !self.registered.contains(n))
            .cloned()
            .collect();
        agents_io::register_tool_methods(&methods, new, &self.agents_tx);
        self.registered = names;
        let claims = self.executor.mcp_claims();
        self.apply(Input::ToolsChanged { tools, claims }).await
    }

    /// Maps a room event to an input; packets and streams go through the order queue
    /// (returns None then).
    fn room_event(
        &mut self,
        ev: RoomEvent,
        stream_tx: &mpsc::UnboundedSender<(Ticket, Inbound)>,
    ) -> Option<Input> {
        match ev {
            RoomEvent::Data(m) => {
                if m.reliable && m.topic.as_deref() == Some(TOPIC) {
                    self.order.packet(m.sender_identity, m.payload);
                }
                None
            }
            RoomEvent::StreamOpened(reader)
                if agents_io::is_transcription(
                    &reader,
                    self.machine.assistant(),
                    self.room.local_participant().map(|p| p.identity).as_deref(),
                ) =>
            {
                agents_io::spawn_transcript_reader(
                    reader,
                    self.agents_tx.clone(),
                    &self.local_tracks,
                );
                None
            }
            RoomEvent::ParticipantAttributesChanged {
                participant,
                changed,
            } if changed.contains_key(agents_io::AGENT_STATE) => {
                agents_io::agent_state(&participant)
            }
            RoomEvent::StreamOpened(reader) => {
                let ours = reader.info.topic == TOPIC
                    && self.machine.assistant() == Some(reader.info.sender_identity.as_str());
                if ours {
                    let ticket = self.order.stream();
                    let tx = stream_tx.clone();
                    tokio::spawn(async move {
                        let item = read_stream(reader).await;
                        let _ = tx.send((ticket, item));
                    });
                }
                None
            }
            RoomEvent::AssistantJoined(p) => {
                self.assistant_sid = Some(p.sid.clone());
                if let Some(state) = agents_io::agent_state(&p) {
                    // Its state is known at once: after the join, tell the machine.
                    let _ = self.agents_tx.send(AgentsInput::Input(state));
                }
                Some(Input::AssistantJoined {
                    identity: p.identity,
                })
            }
            RoomEvent::AssistantLeft(p) => {
                self.assistant_sid = None;
                Some(Input::AssistantLeft {
                    identity: p.identity,
                })
            }
            RoomEvent::Reconnecting { reason } => {
                if self.sid_at_loss.is_none() {
                    self.sid_at_loss = Some(self.assistant_sid.clone());
                }
                Some(Input::Reconnecting { reason })
            }
            RoomEvent::Reconnected { resumed } => {
                self.network_path();
                // The roster after a rejoin keeps an assistant with the same identity
                // without an event; its session id tells whether it is the same session.
                let now = self.room.assistant().map(|p| p.sid);
                let before = self
                    .sid_at_loss
                    .take()
                    .unwrap_or_else(|| self.assistant_sid.clone());
                self.assistant_sid.clone_from(&now);
                Some(Input::Reconnected {
                    resumed,
                    assistant_changed: now.is_none() || now != before,
                })
            }
            RoomEvent::AudioTrackSubscribed {
                participant,
                track_sid,
                stream,
            } => {
                // Only the assistant's audio is played; a track the room could not tie
                // to a participant (no identity) is nobody's, never the assistant's.
                let theirs = !participant.identity.is_empty()
                    && self.machine.assistant() == Some(participant.identity.as_str());
                if let (true, Some(v)) = (theirs, &self.voice) {
                    let _ = v.send(VoiceEvent::AssistantAudio { track_sid, stream });
                }
                None
            }
            RoomEvent::LocalTrackUnpublished { sid, by_server } => {
                if let Some(v) = &self.voice {
                    let _ = v.send(VoiceEvent::LocalTrackLost { sid, by_server });
                }
                None
            }
            RoomEvent::LocalTrackMutedByServer { sid } => {
                if let Some(v) = &self.voice {
                    let _ = v.send(VoiceEvent::LocalTrackMutedByServer { sid });
                }
                None
            }
            RoomEvent::LocalPermissionsChanged {
                can_publish,
                can_publish_data,
                ..
            } => {
                if !can_publish_data {
                    tracing::warn!(
                        "the server no longer relays our data: the assistant will not hear from us"
                    );
                }
                if !can_publish {
                    tracing::warn!("the server no longer lets us publish: voice cannot be sent");
                }
                None
            }
            RoomEvent::RpcRefused { caller, method } => Some(Input::RpcRefused { caller, method }),
            RoomEvent::Disconnected { reason } => Some(Input::Disconnected {
                reason: reason.to_string(),
            }),
            _ => None,
        }
    }

    async fn drain_inbound(&mut self) -> bool {
        while let Some(item) = self.order.pop() {
            let input = match item {
                Inbound::Bytes { sender, bytes } => Input::Received { sender, bytes },
                Inbound::TooLarge { sender, size } => Input::TooLarge { sender, size },
                Inbound::Failed { sender, reason } => Input::StreamFailed { sender, reason },
            };
            if self.apply(input).await {
                return true;
            }
        }
        false
    }

    /// Runs one input through the machine and carries out the effects. True = leave.
    async fn apply(&mut self, input: Input) -> bool {
        let effects = self.machine.handle(input, now_ms());
        let mut leave = false;
        for fx in effects {
            match fx {
                Effect::Send { to, message } => {
                    if matches!(message, Message::ToolsChanged(_)) {
                        self.catalogues_queued.fetch_add(1, Ordering::AcqRel);
                    }
                    if self.send.send((to, message)).is_err() {
                        self.catalogues_queued.store(0, Ordering::Release);
                    }
                }
                Effect::RunTool {
                    grant_scope,
                    request,
                    ..
                } => self.executor.run(&grant_scope, request),
                Effect::CancelTool(c) => {
                    self.executor.cancel(&c);
                }
                Effect::SendText { to, topic, text } => {
                    let _ = self
                        .text
                        .send(agents_io::Outgoing::Text { to, topic, text });
                }
                Effect::SendBytes(file) => {
                    let _ = self.text.send(agents_io::Outgoing::Bytes(file));
                }
                Effect::ReadConversation {
                    request_id,
                    conversation_id,
                } => {
                    if let Some(tx) = self.replies.remove(&request_id) {
                        let store = self.store.clone();
                        tokio::spawn(async move {
                            let _ = tx.send(read_conversation(&store, &conversation_id).await);
                        });
                    }
                }
                Effect::RpcReply { request_id, reply } => {
                    if let Some(tx) = self.replies.remove(&request_id) {
                        // The caller may have stopped waiting: then nobody listens.
                        let _ = tx.send(reply);
                    }
                }
                Effect::Record(r) => self.record(r).await,
                Effect::Ui(ev) => {
                    if let UiEvent::SessionStarted {
                        conversation_id, ..
                    } = &ev
                    {
                        let _ = self.conv.send(Some(conversation_id.clone()));
                    }
                    let _ = self.ui.send(ev);
                }
                Effect::Leave { .. } => leave = true,
            }
        }
        leave || self.machine.is_ended()
    }

    async fn record(&mut self, r: Record) {
        let s = &self.store;
        let pending = match r {
            Record::Conversation(c) => {
                if self.begun.contains(c.id.as_str()) {
                    return;
                }
                self.begun.insert(c.id.0.clone());
                // Continuing a stored conversation: nothing to create.
                match s.conversation(c.id.clone()).await {
                    Ok(Some(_)) => return,
                    Ok(None) => s.begin_conversation(c),
                    Err(e) => {
                        self.store_error(e);
                        return;
                    }
                }
            }
            Record::EndConversation { id, at } => s.end_conversation(id, at),
            Record::Message(m) => s.log_message(m),
            Record::Delta(d) => s.append_message_delta(d),
            Record::Status(st) => s.log_status(st),
            Record::Tool(t) => s.log_tool_event(t),
            Record::Consent(c) => s.log_consent(c),
            Record::ProtocolError(e) => s.log_protocol_error(e),
            Record::Attachment(a) => s.log_attachment(a),
        };
        let ui = self.ui.clone();
        tokio::spawn(async move {
            if let Err(e) = pending.await {
                let _ = ui.send(UiEvent::Error {
                    message: format!("the conversation log refused a write: {e}"),
                });
            }
        });
    }

    fn store_error(&self, e: outpost_store::Error) {
        let _ = self.ui.send(UiEvent::Error {
            message: format!("the conversation log failed: {e}"),
        });
    }
}

/// The answer to `outpost.conversation`: the stored messages of `conversation_id`, after
/// the writes queued so far (the user's newest message among them).
async fn read_conversation(
    store: &Store,
    conversation_id: &str,
) -> std::result::Result<String, crate::machine::RpcFailure> {
    let failed = |e: outpost_store::Error| crate::machine::RpcFailure {
        code: crate::machine::RPC_APPLICATION_ERROR,
        message: format!("Outpost could not read the conversation: {e}"),
        data: None,
    };
    store.flush().await.map_err(failed)?;
    let timeline = store
        .timeline(conversation_id.into())
        .await
        .map_err(failed)?;
    let messages: Vec<(&str, &str)> = timeline
        .items
        .iter()
        .filter_map(|item| match item {
            outpost_store::TimelineItem::Message(m) => Some((
                match m.role {
                    outpost_store::Role::User => "user",
                    outpost_store::Role::Assistant => "assistant",
                },
                m.text.as_str(),
            )),
            _ => None,
        })
        .collect();
    Ok(agents_io::conversation_reply(conversation_id, &messages))
}

async fn read_stream(mut reader: StreamReader) -> Inbound {
    let sender = reader.info.sender_identity.clone();
    let announced = reader
        .info
        .total_length
        .and_then(|n| usize::try_from(n).ok());
    if announced.is_some_and(|n| n > MAX_MESSAGE_BYTES) {
        return Inbound::TooLarge {
            sender,
            size: announced.unwrap_or(usize::MAX),
        };
    }
    let mut buf = Vec::with_capacity(announced.unwrap_or(0).min(MAX_MESSAGE_BYTES));
    while let Some(chunk) = reader.next_chunk().await {
        match chunk {
            Ok(c) => {
                if buf.len() + c.len() > MAX_MESSAGE_BYTES {
                    // Dropping the reader stops buffering the rest.
                    return Inbound::TooLarge {
                        sender,
                        size: buf.len() + c.len(),
                    };
                }
                buf.extend_from_slice(&c);
            }
            Err(e) => {
                return Inbound::Failed {
                    sender,
                    reason: e.to_string(),
                };
            }
        }
    }
    Inbound::Bytes { sender, bytes: buf }
}

/// Takes one off a count when dropped.
struct CountDown(Arc<AtomicUsize>);

impl Drop for CountDown {
    fn drop(&mut self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// Sends messages one at a time, in order: a packet or a byte stream by size.
async fn sender_task(
    room: Room,
    mut rx: mpsc::UnboundedReceiver<(String, Message)>,
    ui: mpsc::UnboundedSender<UiEvent>,
    catalogues_queued: Arc<AtomicUsize>,
) {
    while let Some((to, message)) = rx.recv().await {
        // Counted down whatever becomes of it (sent, refused, failed).
        let _catalogue = matches!(message, Message::ToolsChanged(_))
            .then(|| CountDown(Arc::clone(&catalogues_queued)));
        let framed = match frame(&message) {
            Ok(f) => f,
            Err(e) => match &message {
                // A result that cannot be encoded (e.g. over the size limit) is still
                // answered, exactly once, with a failure the assistant can read.
                Message::ToolUseResult(r) => {
                    let fallback = ToolUseResult::execution_error(
                        &r.id,
                        format!("The tool's result could not be sent: {e}"),
                        None,
                    );
                    match frame(&Message::ToolUseResult(fallback)) {
                        Ok(f) => f,
                        Err(e) => {
                            let _ = ui.send(UiEvent::Error {
                                message: format!("could not encode a tool result: {e}"),
                            });
                            continue;
                        }
                    }
                }
                _ => {
                    let _ = ui.send(UiEvent::Error {
                        message: format!("could not encode a message: {e}"),
                    });
                    continue;
                }
            },
        };
        let sent = match framed {
            Frame::Packet(bytes) => room
                .send_data(bytes, DataOptions::topic(TOPIC).to(to))
                .await
                .map(drop),
            Frame::Stream(bytes) => {
                let opts = StreamOptions {
                    topic: TOPIC.into(),
                    destination_identities: vec![to],
                    mime_type: Some("application/msgpack".into()),
                    ..Default::default()
                };
                room.send_bytes(&bytes, opts).await.map(drop)
            }
        };
        if let Err(e) = sent {
            let _ = ui.send(UiEvent::Error {
                message: format!("could not send a message to the assistant: {e}"),
            });
        }
    }
}
