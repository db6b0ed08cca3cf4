"""Stop words per language: function words that match nearly every text, so they only add
noise to a keyword query. English dropped them for +0.01-0.02 R@10 on LoCoMo. Month-like and
name-like words ("May", "Will", "US") are not listed: they carry meaning. The other lists
follow the Snowball project's, trimmed to function words.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_WORDS: dict[str, frozenset[str]] = {
    "en": _words(
        """
        a an the and or but if of to in on at by for with from about as into over after before up
        down out off again once than then so not no nor is are was were be been being am do does
        did done have has had having what which who whom whose when where why how that this these
        those it its i you he she we they me him her them my your his our their mine yours hers
        ours theirs myself yourself there here can could would should shall might must just also
        any some all each every very too more most other such own same ca wo
        ya em
        """
    ),
    "de": _words(
        """
        aber alle allem allen aller alles als also am an ander andere anderem anderen anderer
        anderes auch auf aus bei bin bis bist da damit dann das dass dein deine deinem deinen
        deiner dem den denn der des dich die dies diese diesem diesen dieser dieses dir doch dort
        du durch ein eine einem einen einer eines er es etwas euch euer eure für gegen gewesen hab
        habe haben hat hatte hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem ihren ihrer
        im in indem ins ist jede jedem jeden jeder jedes jene jetzt kann kein keine keinem keinen
        man manche mein meine meinem meinen meiner mich mir mit muss nach nicht nichts noch nun nur
        ob oder ohne sehr sein seine seinem seinen seiner sich sie sind so solche soll sondern
        über um und uns unser unsere unter vom von vor war waren warst was weil welche welchem
        welchen welcher welches wenn wer werde werden wie wieder will wir wird wo wollen zu zum zur
        zwar zwischen wann warum wieso wem wen
        """
    ),
    "es": _words(
        """
        a al algo algunas algunos ante antes como con contra cual cuando de del desde donde
        durante e el ella ellas ellos en entre era erais eran eras eres es esa esas ese eso esos
        esta estaba estado estamos estar estas este esto estos estoy está están fue fueron fui ha
        han has hasta hay he la las le les lo los me mi mis mucho muy más nada ni no nos nosotros
        o os otra otras otro otros para pero poco por porque que quien quienes qué se sea ser si
        sido sin sobre son su sus también te tengo tiene tienen tu tus tú un una uno unos y ya yo
        él mí cuál cuándo dónde cómo quién cuánto cuántos mío mía
        """
    ),
    "fr": _words(
        """
        a à ai au aux avec avez avons avait c ce ces cet cette d dans de des du elle elles en es
        est et été être eu il ils j je l la le les leur leurs lui m ma mais me même mes moi mon
        n ne nos notre nous on ont ou où par pas pour qu que quel quelle quelles quels qui s sa
        sans se ses si son sont sur t ta te tes toi ton tu un une vos votre vous y était étaient
        suis sommes êtes était comment quand pourquoi combien est-ce
        """
    ),
    "it": _words(
        """
        a ad al alla alle ai agli all che chi ci come con cosa da dal dalla dei del della delle di
        dove e è ed era gli ha hai hanno ho i il in io la le lei li lo loro lui ma me mi mia mio
        ne nei nel nella noi non o per perché più quale quando quello questa questo se si sono su
        sua suo sul sulla ti tu tua tuo un una uno vi voi
        """
    ),
    "pt": _words(
        """
        a ao aos as à às com como da das de dela dele do dos e é ela ele eles em entre era eram
        essa esse esta este eu foi foram há isso isto já la lhe mais mas me meu minha muito na
        nas não nem no nos nós o os ou para pela pelo por qual quando que quem se sem ser seu sua
        são também te tem tenho teu tua um uma você vocês
        """
    ),
    "nl": _words(
        """
        aan al als bij dan dat de der deze die dit doch doen door dus een en er ge geen had heb
        hebben heeft hem het hier hij hoe hun ik in is ja je kan kon maar me meer men met mij mijn
        na naar niet niets nog nu of om omdat ons ook op over reeds te tot u uit van veel voor
        want waren was wat we wel werd wie wij wil worden zal ze zei zelf zich zij zijn zo zou
        """
    ),
}

# Chinese and Japanese characters that are grammar, not content: as single characters they
# would match every text (bigrams that contain them still index).
CJK_STOP_CHARACTERS = frozenset(
    "的了是我你他她它们在和有也就都不这那吗呢吧啊个么之与及或而着过把被给对很还又让"
    "のはがをにでともへやかなたてだです"
)
# Question words written with Han characters (what, who, which, how, how many): a question's
# grammar, like "what" and "who" in English, not what it is about.
CJK_QUESTION_CHARACTERS = frozenset("何誰谁哪什怎幾几")
# Chinese and Japanese function words of two characters (pronouns, conjunctions, modal verbs,
# degree words, "feel", "together", "today"): what a question's bigrams share with any memory
# of any user, like the English stop words, so they say nothing about what it is about.
CJK_STOP_WORDS = frozenset(
    """
    我们 你们 他们 她们 它们 自己 大家 别人 这个 那个 这些 那些 这样 那样 这里 那里 这么 那么
    如果 因为 所以 但是 可是 而且 或者 还是 然后 虽然 不过 其实 就是 还有 只是 不是 没有
    可以 应该 可能 能够 需要 想要 知道 觉得 感觉 认为 希望 记得 喜欢 起来 一下 一点 一些 一个
    一样 一起 一直 已经 真的 非常 特别 超级 比较 有点 有些 事情 东西 时候 现在 今天 昨天 明天
    最近 上次 以前 以后 之前 之后
    自分 今日 昨日 明日 一緒 時間 今度 前回 本当 全部 場合
    """.split()
)
