//! The slash commands of `kolibri chat`, as `ollama run` spells them: a line whose first word
//! is `/` and letters is a command, never sent to the model (`/usr/bin is ...` is a message).

/// What a command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Exit,
    /// Forget the conversation (the system prompt stays).
    Clear,
    Help,
    Set(Setting),
    /// Print the settings and the conversation's length.
    Show,
    Save(String),
    Load(String),
    /// A command misspelt or misused: what to tell the user.
    Invalid(String),
}

/// What `/set` changes.
#[derive(Debug, PartialEq)]
pub enum Setting {
    /// The system prompt; `None` removes it.
    System(Option<String>),
    Temperature(f32),
    TopK(usize),
    TopP(f32),
    MinP(f32),
    Seed(u64),
    /// Most tokens per reply.
    NPredict(usize),
    /// Statistics (tokens, speed, time to first token) after each reply.
    Verbose(bool),
}

pub const HELP: &str = "\
/set system TEXT      set the system prompt (/set system alone removes it)
/set temperature T    sampling temperature (0: greedy); also top_k, top_p, min_p, seed
/set num_predict N    most tokens per reply
/set verbose          speed and token counts after each reply (/set quiet: not)
/show                 the settings and the conversation's length
/save FILE            write the conversation to FILE (JSON, OpenAI's messages)
/load FILE            read a conversation written by /save (or any such messages list)
/clear                forget the conversation (also /reset)
/exit                 leave (also /bye, Ctrl-D, or Ctrl-C twice at the prompt)
Ctrl-C while a reply is written stops it; Up and Down walk the history.
End a line with \\ to go on, or put \"\"\" on a line to open and close a block of lines.
";

/// The command `line` holds, or `None` when it is a message for the model.
pub fn parse(line: &str) -> Option<Command> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let name = word.strip_prefix('/')?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic() || c == '?') {
        return None;
    }
    let rest = rest.trim();
    let file = |what: &str| match rest {
        "" => Command::Invalid(format!("/{what} needs a file name")),
        f => match what {
            "save" => Command::Save(f.to_string()),
            _ => Command::Load(f.to_string()),
        },
    };
    Some(match name {
        "exit" | "bye" | "quit" => Command::Exit,
        "clear" | "reset" => Command::Clear,
        "help" | "?" => Command::Help,
        "show" => Command::Show,
        "save" => file("save"),
        "load" => file("load"),
        "set" => set(rest).map_or_else(Command::Invalid, Command::Set),
        _ => Command::Invalid(format!("unknown command /{name}; /help lists them")),
    })
}

/// The setting `/set NAME VALUE` names.
fn set(rest: &str) -> Result<Setting, String> {
    let (name, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let value = value.trim();
    fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
        value
            .parse()
            .map_err(|_| format!("/set {name}: {value:?} is not a valid value"))
    }
    Ok(match name {
        "system" => Setting::System((!value.is_empty()).then(|| value.to_string())),
        "temperature" | "temp" => Setting::Temperature(number(name, value)?),
        "top_k" => Setting::TopK(number(name, value)?),
        "top_p" => Setting::TopP(number(name, value)?),
        "min_p" => Setting::MinP(number(name, value)?),
        "seed" => Setting::Seed(number(name, value)?),
        "num_predict" => Setting::NPredict(number(name, value)?),
        "verbose" => Setting::Verbose(true),
        "quiet" => Setting::Verbose(false),
        "" => return Err("/set what? /help lists the settings".into()),
        other => return Err(format!("/set {other}: no such setting; /help lists them")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_messages_are_told_apart() {
        assert_eq!(parse("/exit"), Some(Command::Exit));
        assert_eq!(parse("  /bye "), Some(Command::Exit));
        assert_eq!(parse("/?"), Some(Command::Help));
        assert_eq!(
            parse("/save chat.json"),
            Some(Command::Save("chat.json".into()))
        );
        assert!(matches!(parse("/load"), Some(Command::Invalid(_))));
        assert!(matches!(parse("/sett x"), Some(Command::Invalid(e)) if e.contains("/sett")));
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/usr/bin is a folder"), None);
        assert_eq!(parse("/"), None);
    }

    #[test]
    fn settings_are_checked() {
        let set = |s| parse(s).unwrap();
        assert_eq!(
            set("/set system Talk like a pirate."),
            Command::Set(Setting::System(Some("Talk like a pirate.".into())))
        );
        assert_eq!(set("/set system"), Command::Set(Setting::System(None)));
        assert_eq!(
            set("/set temperature 0.5"),
            Command::Set(Setting::Temperature(0.5))
        );
        assert_eq!(set("/set verbose"), Command::Set(Setting::Verbose(true)));
        assert!(matches!(set("/set temperature hot"), Command::Invalid(_)));
        assert!(matches!(set("/set colour red"), Command::Invalid(_)));
        assert!(matches!(set("/set"), Command::Invalid(_)));
    }
}
