"""The README's Python examples run as written; a file it shows is shown as it is."""

from tests.project.readme_blocks import README, REPO, readme_blocks


def test_readme_python_examples_run(capsys):
    blocks = [b for b in readme_blocks("python") if b.marker is None]
    assert blocks, "the README shows the engine with a Python example"
    for block in blocks:
        namespace: dict = {}
        exec(compile(block.code, str(README), "exec"), namespace)
        state = namespace["state"]
        assert state.is_finished and state.outcome is not None
    assert "Outcome(scores=" in capsys.readouterr().out


def test_readme_opens_with_the_two_commands():
    head = README.read_text().splitlines()[:6]
    assert any(line.startswith("make run") for line in head)
    assert any(line.startswith("make test") for line in head)


def test_files_the_readme_shows_are_shown_as_they_are():
    shown = [b for b in readme_blocks() if b.marker and b.marker.startswith("file ")]
    assert shown, "the README shows examples/random_bot.py"
    for block in shown:
        path = REPO / block.marker.removeprefix("file ")
        assert block.code == path.read_text(), f"{block} differs from {path.relative_to(REPO)}"
