from cuda_agent.core.hashing import files_hash, text_hash


def test_text_hash_ignores_line_endings() -> None:
    assert text_hash("a\r\nb\n") == text_hash("a\nb\n")
    assert text_hash("a\nb\n") != text_hash("a\nc\n")


def test_files_hash_is_order_independent_and_name_sensitive() -> None:
    a = files_hash([("x.cu", "1"), ("y.cpp", "2")])
    assert a == files_hash([("y.cpp", "2"), ("x.cu", "1")])
    assert a != files_hash([("x.cu", "2"), ("y.cpp", "1")])
