"""LangChain's OpenAI chat model against `kolibri serve` (run by test_openai.py in its own
process: langchain-openai pins an older `openai` than the main suite's).

Usage: test_langchain.py BASE_URL API_KEY
Checks `with_structured_output(PydanticModel)` and `bind_tools([...])`; exits non-zero on a
failure, printing what was wrong.
"""

import sys

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field


class City(BaseModel):
    """A city and facts about it."""
    name: str = Field(description="The city's name")
    country: str = Field(description="The country it is in")
    population_millions: float = Field(description="Inhabitants, in millions")


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny in {city}"


def main():
    url, key = sys.argv[1:3]
    llm = ChatOpenAI(base_url=url + "/v1", api_key=key, model="any", temperature=0,
                     max_tokens=120, max_retries=0)
    # Structured output: the default method is json_schema (strict), the Pydantic model back.
    for method in ("json_schema", "function_calling", "json_mode"):
        out = llm.with_structured_output(City, method=method).invoke(
            "Describe Paris as JSON with the fields name, country and population_millions.")
        assert isinstance(out, City) and out.name, (method, out)
    # Tools: the call comes back as LangChain's tool_calls, arguments parsed.
    msg = llm.bind_tools([get_weather]).invoke("What is the weather in Paris?")
    assert msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather", msg
    assert "paris" in msg.tool_calls[0]["args"]["city"].lower(), msg
    forced = llm.bind_tools([get_weather], tool_choice="get_weather").invoke("Hello there")
    assert forced.tool_calls and forced.tool_calls[0]["name"] == "get_weather", forced
    print("langchain: ok")


if __name__ == "__main__":
    main()
