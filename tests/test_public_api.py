import inspect

import ctxbudget


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name in dir(ctxbudget)
        if not name.startswith("_") and not inspect.ismodule(getattr(ctxbudget, name))
    }
    assert set(ctxbudget.__all__) - {"__version__"} == public
    for name in ctxbudget.__all__:
        assert hasattr(ctxbudget, name)


def _question() -> dict[str, object]:
    return {"question": "What was agreed?", "documents": [{"page_content": "The parties agreed to terms."}]}


def test_fit_and_count_name_their_input_format_and_accept_the_former_name() -> None:
    import pytest

    body = _question()
    by_new = ctxbudget.fit(body, model="gpt-4o", input_format="question")
    by_old = ctxbudget.fit(body, model="gpt-4o", format="question")
    assert by_new.report == by_old.report and by_new.report.format == "question"
    assert ctxbudget.count(body, model="gpt-4o", input_format="question")["format"] == "question"
    with pytest.raises(ctxbudget.ConfigError, match="disagree"):
        ctxbudget.fit(body, model="gpt-4o", input_format="question", format="openai")
    for bad in (["openai"], 3):
        with pytest.raises(ctxbudget.ConfigError, match="format name"):
            ctxbudget.fit(body, model="gpt-4o", input_format=bad)  # type: ignore[arg-type]
        with pytest.raises(ctxbudget.ConfigError, match="format name"):
            ctxbudget.count(body, model="gpt-4o", format=bad)  # type: ignore[arg-type]


def test_assemble_names_its_output_format_and_accepts_the_former_name() -> None:
    import pytest

    from .test_assemble import POLICY as policy
    from .test_assemble import request as make_request

    request = make_request()
    new = ctxbudget.assemble(request, policy=policy, model="gpt-4o", output_format="openai")
    old = ctxbudget.assemble(request, policy=policy, model="gpt-4o", format="openai")
    assert new.request == old.request and "messages" in new.request
    for given, former in (("text", "openai"), ("anthropic", "openai"), ("openai", "anthropic")):
        with pytest.raises(ctxbudget.ConfigError, match="disagree"):
            ctxbudget.assemble(request, policy=policy, model="gpt-4o", output_format=given, format=former)
    default = ctxbudget.assemble(request, policy=policy, model="gpt-4o")
    assert (
        default.request
        == ctxbudget.assemble(request, policy=policy, model="gpt-4o", format="anthropic").request
    )


def test_the_pipelines_faces_export_what_their_docs_use() -> None:
    from ctxbudget import assembly, fitting

    for package in (assembly, fitting):
        assert package.__all__ and all(hasattr(package, name) for name in package.__all__)
    assert fitting.fit is ctxbudget.fit and assembly.assemble is ctxbudget.assemble
