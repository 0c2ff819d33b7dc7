//! `$ERRAND_CHILDREN`: the jobs a command adds to its step's workflow, one
//! JSON object a line (each as `POST /v1/jobs` takes one), stored with the
//! step's completion when the command succeeds and ignored otherwise.

use std::path::Path;

use errand_core::{MAX_PAYLOAD_BYTES, NewJob, Outcome};
use tokio::io::AsyncReadExt;

/// The most a `$ERRAND_CHILDREN` file may hold: 64 MiB.
pub const MAX_CHILDREN_FILE: u64 = 64 * 1024 * 1024;

/// The children the command wrote to `path`: none when it wrote no file
/// (or an empty one). A file that cannot be used fails the attempt for
/// good, saying why: the same command would write it again.
pub(crate) async fn read(path: &Path) -> Result<Vec<NewJob>, Outcome> {
    let refused = |why: String| {
        Outcome::permanent(format!(
            "the command succeeded but the children it wrote to $ERRAND_CHILDREN were refused, \
             so the step did not complete: {why}; write one JSON object a line, each a job as \
             POST /v1/jobs takes one"
        ))
    };
    let cannot = |e: std::io::Error| {
        Outcome::retry(format!(
            "cannot read the command's children file {}: {e}",
            path.display()
        ))
    };
    match tokio::fs::metadata(path).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(cannot(e)),
        Ok(meta) if !meta.is_file() => return Err(refused("it is not a regular file".into())),
        Ok(meta) if meta.len() > MAX_CHILDREN_FILE => {
            return Err(refused(format!(
                "the file holds {} bytes, more than {MAX_CHILDREN_FILE}",
                meta.len()
            )));
        }
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    let file = tokio::fs::File::open(path).await.map_err(cannot)?;
    file.take(MAX_CHILDREN_FILE + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_CHILDREN_FILE {
        return Err(refused(format!(
            "the file holds more than {MAX_CHILDREN_FILE} bytes"
        )));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| refused("the file is not UTF-8 text".into()))?;
    errand_core::jobs_from_json_lines(&text, MAX_PAYLOAD_BYTES).map_err(|e| {
        refused(match e {
            errand_core::Error::Invalid(m) => m,
            other => other.to_string(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_file_is_no_children_and_a_bad_line_fails_for_good() {
        let dir = std::env::temp_dir().join(format!("errand-children-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("children.jsonl");
        assert!(read(&path).await.unwrap().is_empty());
        std::fs::write(
            &path,
            "{\"kind\": \"page\", \"payload\": {\"n\": 1}}\n\n{\"kind\": \"page\"}\n",
        )
        .unwrap();
        let kids = read(&path).await.unwrap();
        assert_eq!(kids.len(), 2);
        assert_eq!(kids[0].payload.as_str(), r#"{"n": 1}"#);
        std::fs::write(&path, "{\"kind\": \"page\"}\nnot json\n").unwrap();
        match read(&path).await {
            Err(Outcome::Permanent { error }) => {
                assert!(error.contains("line 2"), "{error}");
                assert!(error.contains("$ERRAND_CHILDREN"), "{error}");
            }
            other => panic!("expected a permanent failure, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
