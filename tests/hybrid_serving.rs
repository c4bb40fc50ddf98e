//! Serving hybrid models (recurrent state beside KV rows) with continuous batching: four
//! clients chat at once, four turns each, sharing a system prompt; every turn after the first
//! evaluates only its new tokens (its slot's state is rewound to the shared prefix, not
//! rebuilt), and a client whose history left its slot resumes from a checkpoint.

mod common;

use common::synthetic::synthetic_path;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use kolibri::batching::{Completion, Event, EventSink, Request, Scheduler, SchedulerParams, Stats};
use kolibri::model::{KvType, Model};
use kolibri::sampling::SamplerParams;
use kolibri::tokenizer::TokenId;

const HYBRIDS: [&str; 2] = ["lfm2-tiny", "qwen35-tiny"];
const SYSTEM: &str = "You are a careful assistant for a small town library. You answer \
                      questions about opening hours, the catalogue, events for children, the \
                      reading room and the rules for borrowing books, films and music. Keep \
                      answers short, friendly and precise; when you do not know, say so and \
                      suggest asking at the front desk, which is open every day but Sunday.";

fn load(name: &str) -> Arc<Model> {
    Arc::new(Model::load(synthetic_path(name)).unwrap())
}

struct ChannelSink(mpsc::Sender<Event>);

impl EventSink for ChannelSink {
    fn send(&mut self, event: Event) -> bool {
        self.0.send(event).is_ok()
    }
    fn is_closed(&self) -> bool {
        false
    }
}

/// Submits `prompt` for `max_tokens` greedy tokens and waits for the completion.
fn ask(s: &Scheduler, prompt: Vec<TokenId>, max_tokens: usize) -> Completion {
    let (tx, rx) = mpsc::channel();
    s.submit(Request {
        prompt,
        max_tokens,
        sampling: SamplerParams::greedy(),
        stop: Vec::new(),
        deadline: None,
        markup: Default::default(),
        sink: Box::new(ChannelSink(tx)),
        logprobs: None,
        constraint: None,
    })
    .unwrap();
    loop {
        match rx.recv_timeout(Duration::from_secs(120)).expect("an event") {
            Event::Done(c) => return c,
            Event::Failed(m) => panic!("{m}"),
            Event::Text(_) | Event::Logprobs(_) => {}
        }
    }
}

#[test]
fn chat_turns_of_concurrent_clients_evaluate_only_their_new_tokens() {
    for name in HYBRIDS {
        let model = load(name);
        let s = Arc::new(
            Scheduler::start(
                Arc::clone(&model),
                SchedulerParams {
                    n_slots: 4,
                    n_ctx: 512,
                    n_threads: common::threads(),
                    n_batch: 64,
                    max_queue: 8,
                    type_k: KvType::F16,
                    type_v: KvType::F16,
                    context_shift: None,
                    speculation: Default::default(),
                },
            )
            .unwrap(),
        );
        let system = model.tokenizer.encode(SYSTEM, true, true);
        assert!(system.len() > 64);
        let clients: Vec<_> = (0..4)
            .map(|client| {
                let (s, model, system) = (Arc::clone(&s), Arc::clone(&model), system.clone());
                std::thread::spawn(move || {
                    let mut history = system;
                    for turn in 0..4 {
                        let user = format!(" Question {turn} from reader {client}: when?");
                        history.extend(model.tokenizer.encode(&user, false, false));
                        let held = history.len();
                        let c = ask(&s, history.clone(), 6 + client);
                        if turn > 0 {
                            // All of the previous turn is in the slot but its last reply
                            // token (sampled, never evaluated).
                            let new = model.tokenizer.encode(&user, false, false).len();
                            assert_eq!(
                                c.cached_tokens,
                                held - new - 1,
                                "{name}: client {client}, turn {turn}"
                            );
                        }
                        history.extend(&c.tokens);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        // A client whose history no slot holds any more (a new conversation with the same
        // system prompt) resumes from a checkpoint of it, not from the start.
        let mut fresh = system.clone();
        fresh.extend(
            model
                .tokenizer
                .encode(" A new reader asks: where?", false, false),
        );
        let c = ask(&s, fresh, 4);
        assert!(
            c.cached_tokens >= 64.min(system.len()),
            "{name}: only {} of the shared {} system tokens reused",
            c.cached_tokens,
            system.len()
        );
        assert!(Stats::get(&s.stats().prompt_tokens_cached) > 0);
    }
}
