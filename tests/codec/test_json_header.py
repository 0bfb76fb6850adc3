"""JSON headers: written byte-for-byte like fastjson, read as leniently as fastjson (SPEC 2)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import codec._command
from codec import (
    CodecError,
    LanguageCode,
    MalformedFrameError,
    RemotingCommand,
    SerializeType,
    decode_frame,
    encode_frame,
)
from codec._header_json import encode_json_header
from tests.factories import json_frame, make_command

# --------------------------------------------------------------------------- writing

_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
          '"': '\\"', "\\": "\\\\"}


def fastjson_quote(text: str) -> str:
    """Quote like fastjson's SerializeWriter, written independently of the codec."""
    out = []
    for ch in text:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u2028\u2029":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def header_text(cmd: RemotingCommand) -> str:
    return encode_json_header(cmd).decode("utf-8")


def remark_in_header(remark: str) -> str:
    text = header_text(make_command(remark=remark))
    start = text.index('"remark":') + len('"remark":')
    end = text.index(',"serializeTypeCurrentRPC"')
    return text[start:end]


def test_json_header_keys_are_sorted_without_spaces() -> None:
    cmd = make_command(code=12, opaque=7, flag=3, version=479, language=LanguageCode.GO,
                       remark="r", ext_fields={"b": "2", "a": "1"})
    assert header_text(cmd) == (
        '{"code":12,"extFields":{"a":"1","b":"2"},"flag":3,"language":"GO","opaque":7,'
        '"remark":"r","serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_json_header_omits_null_remark_ext_fields_and_language() -> None:
    cmd = make_command(code=1, opaque=2, language=None)
    assert header_text(cmd) == (
        '{"code":1,"flag":0,"opaque":2,"serializeTypeCurrentRPC":"JSON","version":0}'
    )


def test_json_header_says_json_even_for_a_command_that_was_rocketmq() -> None:
    cmd = make_command(serialize_type=SerializeType.ROCKETMQ)
    assert '"serializeTypeCurrentRPC":"JSON"' in header_text(cmd)


@pytest.mark.parametrize("ch", [chr(c) for c in range(0x20)], ids=lambda c: f"U+{ord(c):04X}")
def test_json_escapes_control_characters_like_fastjson(ch: str) -> None:
    expected = _SHORT.get(ch, f"\\u{ord(ch):04X}")
    assert remark_in_header(f"a{ch}b") == f'"a{expected}b"'


def test_json_escapes_vertical_tab_as_unicode_escape() -> None:
    assert remark_in_header("\x0b") == '"\\u000B"'
    assert remark_in_header("\x1f\x01") == '"\\u001F\\u0001"'  # upper-case hex


def test_json_escapes_quote_and_backslash() -> None:
    assert remark_in_header('say "hi" \\ bye') == '"say \\"hi\\" \\\\ bye"'


@pytest.mark.parametrize("code_point", [*range(0x7F, 0xA0), 0x2028, 0x2029])
def test_json_escapes_del_c1_controls_and_line_separators(code_point: int) -> None:
    assert remark_in_header(chr(code_point)) == f'"\\u{code_point:04X}"'


def test_json_writes_non_ascii_raw() -> None:
    text = "héllo ✓ 😀 \u00a0 \u2027 \u202a"
    assert remark_in_header(text) == f'"{text}"'
    assert "\\u" not in remark_in_header(text)


def test_json_does_not_escape_slash() -> None:
    assert remark_in_header("a/b") == '"a/b"'


def test_json_escapes_ext_field_keys_and_values() -> None:
    cmd = make_command(ext_fields={"k\n": 'v"\x7f'})
    assert '"extFields":{"k\\n":"v\\"\\u007F"}' in header_text(cmd)


def test_json_escaping_keeps_sorted_keys() -> None:
    cmd = make_command(remark="\x01", ext_fields={"z": "\x02", "a": "1"})
    text = header_text(cmd)
    assert text.index('"a"') < text.index('"z"')
    assert text.startswith('{"code":10,"extFields":{"a":"1","z":"\\u0002"},"flag":0,')


@given(st.text(max_size=60))
def test_json_strings_are_quoted_exactly_like_fastjson(text: str) -> None:
    assert remark_in_header(text) == fastjson_quote(text)


@given(st.text(max_size=30), st.text(max_size=30))
def test_json_header_is_valid_json_with_the_same_values(key: str, value: str) -> None:
    cmd = make_command(remark=value, ext_fields={key: value})
    parsed = json.loads(header_text(cmd))
    assert parsed["remark"] == value
    assert parsed["extFields"] == {key: value}


# --------------------------------------------------------------------------- reading


def decode_json(text: str | bytes) -> RemotingCommand:
    return decode_frame(json_frame(text))


def test_json_reader_ignores_unknown_keys() -> None:
    cmd = decode_json('{"code":12,"opaque":3,"bogus":[1,{"x":null}],"type":"REQUEST_COMMAND",'
                      '"serializeTypeCurrentRPC":"ROCKETMQ"}')
    assert (cmd.code, cmd.opaque) == (12, 3)
    assert cmd.serialize_type is SerializeType.JSON  # the frame's type byte wins


def test_json_reader_defaults_missing_keys_like_java(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec._command, "_opaque_counter", itertools.count(500))
    cmd = decode_json("{}")
    assert cmd.code == 0
    assert cmd.language is LanguageCode.JAVA
    assert cmd.version == 0
    assert cmd.flag == 0
    assert cmd.opaque == 500  # Java: the next value of the static requestId counter
    assert cmd.remark is None
    assert cmd.ext_fields is None
    assert decode_json('{"code":1}').opaque == 501


def test_json_reader_gives_each_command_without_opaque_a_fresh_one() -> None:
    first = decode_json('{"code":1}').opaque
    second = decode_json('{"code":1}').opaque
    assert second != first


def test_json_reader_accepts_numbers_given_as_strings() -> None:
    cmd = decode_json('{"code":"12","opaque":"-7","flag":"1","version":"479"}')
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (12, -7, 1, 479)


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "+5", "1_0", "--5", "-", "", "5.0",
                                   "9" * 5000, "99999999999"])
def test_json_reader_refuses_a_number_string_that_is_not_ascii_digits_in_int32(
        value: str) -> None:
    with pytest.raises(MalformedFrameError, match="JSON header field code"):
        decode_json('{"code":"' + value + '","opaque":1}')


def test_json_reader_forgives_spaces_around_a_number_string() -> None:
    assert decode_json('{"code":" 12 ","opaque":"-7"}').code == 12


def test_json_reader_accepts_integral_floats() -> None:
    assert decode_json('{"code":12.0,"opaque":1}').code == 12


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", LanguageCode.PYTHON), ("0", LanguageCode.JAVA), ("13", LanguageCode.NODE_JS),
     ('"PYTHON"', LanguageCode.PYTHON), ('"RUST"', LanguageCode.RUST)],
)
def test_json_reader_accepts_language_by_name_or_ordinal(
    value: str, expected: LanguageCode
) -> None:
    assert decode_json(f'{{"code":1,"opaque":1,"language":{value}}}').language is expected


@pytest.mark.parametrize("value", ['"KLINGON"', '"java"', "99", "-1"])
def test_json_reader_maps_unknown_language_to_none(value: str) -> None:
    assert decode_json(f'{{"code":1,"opaque":1,"language":{value}}}').language is None


def test_json_reader_stringifies_other_ext_value_types() -> None:
    cmd = decode_json(
        '{"code":1,"opaque":1,"extFields":{"int":5,"yes":true,"no":false,"null":null,'
        '"float":1.5,"neg":-3,"list":[1,"a"],"obj":{"k":"v"},"str":"s"}}'
    )
    assert cmd.ext_fields == {
        "int": "5", "yes": "true", "no": "false", "null": None, "float": "1.5", "neg": "-3",
        "list": '[1,"a"]', "obj": '{"k":"v"}', "str": "s",
    }


def test_json_reader_keeps_null_values_as_none() -> None:
    cmd = decode_json('{"code":1,"opaque":1,"extFields":{"a":null,"b":"x"},"remark":null}')
    assert cmd.ext_fields == {"a": None, "b": "x"}
    assert cmd.remark is None


def test_json_reader_accepts_single_quotes_and_unquoted_keys() -> None:
    cmd = decode_json("{code:12,'opaque':3,language:'GO',remark:'it''s',"
                      "extFields:{topic:'TopicTest','k':\"v\"}}".replace("''", "\\'"))
    assert (cmd.code, cmd.opaque, cmd.language) == (12, 3, LanguageCode.GO)
    assert cmd.remark == "it's"
    assert cmd.ext_fields == {"topic": "TopicTest", "k": "v"}


def test_lenient_reader_joins_escaped_surrogate_pairs_like_strict_json() -> None:
    # Read as two lone surrogates, the remark could not be written again (an echo failed).
    lenient = decode_json("{'code':1,'remark':'smile \\ud83d\\ude00'}")
    strict = decode_json('{"code":1,"remark":"smile \\ud83d\\ude00"}')

    assert lenient.remark == strict.remark == "smile \U0001F600"
    assert decode_frame(encode_frame(lenient)).remark == "smile \U0001F600"


def test_json_reader_accepts_whitespace_and_escapes() -> None:
    cmd = decode_json(' {\n "code" : 1 ,\t"opaque":2, "remark":"a\\u0041\\n\\/"\r\n} ')
    assert cmd.remark == "aA\n/"


@pytest.mark.parametrize("text", ["[1,2]", '"text"', "12", "null", "true", "[]"])
def test_json_reader_rejects_non_object_headers(text: str) -> None:
    with pytest.raises(MalformedFrameError, match="must be an object"):
        decode_json(text)


@pytest.mark.parametrize(
    "text",
    ['{"code":', '{"code":1', "{code 1}", '{"code":1}}', "", "{'a':'b}", '{"a":"\\x"}',
     '{"a":nul}', '{"a":"\\u12"}'],
)
def test_json_reader_rejects_broken_json(text: str) -> None:
    with pytest.raises(MalformedFrameError):
        decode_json(text)


def test_json_reader_rejects_invalid_utf8() -> None:
    with pytest.raises(MalformedFrameError, match="UTF-8"):
        decode_json(b'{"code":1,"remark":"\xff\xfe"}')


@pytest.mark.parametrize(
    "text",
    ['{"code":2147483648}', '{"opaque":-2147483649}', '{"flag":"99999999999"}',
     '{"code":1.5}', '{"code":"abc"}', '{"code":true}', '{"code":[1]}', '{"version":{}}',
     '{"language":1.5}', '{"extFields":[1]}', '{"extFields":"a=b"}'],
)
def test_json_reader_rejects_fields_of_the_wrong_type_or_range(text: str) -> None:
    with pytest.raises(MalformedFrameError):
        decode_json(text)


@pytest.mark.parametrize(
    "text",
    ["{'code':" + "9" * 5000 + "}", '{"code":' + "9" * 5000 + "}",
     '{"opaque":"' + "9" * 5000 + '"}', "{'extFields':{'a':[" + "1" * 30 + "]}}",
     '{"remark":' + "9" * 5000 + "}", "{'a':" + "[" * 5000 + "]" * 5000 + "}"],
    ids=["lenient-int", "strict-int", "int-string", "wide-int-in-list", "remark", "deep"],
)
def test_json_reader_survives_huge_numbers_and_deep_nesting(text: str) -> None:
    # Regression: Python's int() refuses > 4300 digits with ValueError, and orjson.dumps
    # refuses ints wider than 64 bits; neither may escape the codec.
    try:
        decode_json(text)
    except CodecError:
        pass


def test_json_reader_reads_what_the_writer_wrote_with_escapes() -> None:
    remark = "".join(chr(c) for c in range(0xA0)) + "\u2028\u2029é"
    cmd = make_command(remark=remark, ext_fields={"\t": "\x7f"})
    assert decode_frame(encode_frame(cmd)).remark == remark


# --------------------------------------------------------------------------- header templates

INT32 = st.integers(-(2**31), 2**31 - 1)


@given(code=INT32, flag=INT32, version=INT32, opaques=st.lists(INT32, min_size=2, max_size=5),
       language=st.sampled_from([*LanguageCode, None]))
def test_cached_header_template_writes_what_the_full_path_writes(
    code: int, flag: int, version: int, opaques: list[int], language: LanguageCode | None,
) -> None:
    """Headers without ext fields or remark come from a per-(code, flag, language, version)
    template after the first one: the bytes must be those of the full path every time."""
    import codec._header_json as hj

    def fresh(opaque: int) -> bytes:
        saved = dict(hj._TEMPLATES)
        hj._TEMPLATES.clear()  # no template: the full path
        try:
            return encode_json_header(make_command(code=code, flag=flag, version=version,
                                                   opaque=opaque, language=language))
        finally:
            hj._TEMPLATES.clear()
            hj._TEMPLATES.update(saved)

    for opaque in opaques:
        cmd = make_command(code=code, flag=flag, version=version, opaque=opaque,
                           language=language)
        expected = fresh(opaque)
        assert encode_json_header(cmd) == expected  # makes the template, or uses it
        assert encode_json_header(cmd) == expected  # uses it
        assert json.loads(expected)["opaque"] == opaque


@pytest.mark.parametrize("field", ["code", "flag", "version", "opaque"])
@pytest.mark.parametrize("bad", [True, 1.0, 2**31])
def test_header_template_never_admits_a_value_the_full_path_rejects(
    field: str, bad: object,
) -> None:
    good = make_command(code=1, flag=1, version=1, opaque=1)
    encode_json_header(good)
    encode_json_header(good)  # a template for (1, 1, PYTHON, 1) now exists
    with pytest.raises(CodecError):
        encode_json_header(make_command(**{"code": 1, "flag": 1, "version": 1, "opaque": 1,
                                           field: bad}))
